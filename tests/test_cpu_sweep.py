"""`.ci/cpu-sweep`, a pinned block's sweep on this CPU, and `.ci/run-history`, the record of which machine trained which
epochs of a run that moved between machines (a GPU lease's checkpoint resumed here)."""
import hashlib, json, os, shutil, subprocess, sys, tarfile, time
from pathlib import Path
import pytest, torch

ROOT = Path(__file__).resolve().parents[1]
WHERE = ['--preset', 'tiny', '--where', 'method=dpsgd', 'seed=0']  # one run of the tiny grid
RUN = 'mpii-dpsgd-finetune-C0.01-eps0.8-s0'

def script_env(**extra)->dict:
    "The scripts' environment: this python, the data and pretraining other tests cache, and `extra`."
    return {**os.environ, 'PYTHON': sys.executable, 'DPHPE_CACHE': os.environ.get('DPHPE_CACHE', str(Path.home()/'.cache'/'dphpe')), **extra}

def history(runs:Path, records:Path, device:str='cpu', *pack)->subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT/'.ci'/'run-history'), str(runs), str(records), device, *pack],
                          cwd=ROOT, env={**os.environ, 'PYTHONPATH': str(ROOT)}, capture_output=True, text=True, timeout=120)

def turns(f:Path)->list: return [(t['device'], t['epochs']) for t in map(json.loads, f.read_text().splitlines())]

def fake_run(runs:Path, name:str, epochs:int, done:int=None, segments:list=None):
    "A run folder: finished (a record of `epochs`) or cut short after `done` epochs (a checkpoint), with the history `segments`."
    d = runs/name; d.mkdir(parents=True)
    if done is None: (d/'metrics.json').write_text(json.dumps({'params': {'epochs': epochs}}))
    else: torch.save({'epoch': done, 'n_epoch': epochs}, d/'checkpoint.pth')
    if segments: (d/'segments.jsonl').write_text(''.join(json.dumps(dict(device=dev, epochs=e, of=epochs, date='2026-11-28')) + '\n' for dev, e in segments))
    return d

def test_history_follows_a_run_between_machines(tmp_path):
    runs, records = tmp_path/'runs', tmp_path/'records'
    fake_run(runs, 'moved', 9, segments=[('cuda', [0, 7])])  # a lease's checkpoint, finished here
    fake_run(runs, 'here', 9)                                 # trained here alone
    fake_run(runs, 'going', 9, done=4, segments=[('cuda', [0, 2])])  # resumed here, not finished
    for r in ('moved', 'here'): (records/r).mkdir(parents=True)
    assert history(runs, records).returncode == 0
    assert turns(records/'moved'/'segments.jsonl') == [('cuda', [0, 7]), ('cpu', [7, 9])]
    assert not (records/'here'/'segments.jsonl').exists() and not (runs/'here'/'segments.jsonl').exists()
    assert turns(runs/'going'/'segments.jsonl') == [('cuda', [0, 2]), ('cpu', [2, 4])]
    history(runs, records)  # again: nothing new trained, nothing added
    assert turns(records/'moved'/'segments.jsonl') == [('cuda', [0, 7]), ('cpu', [7, 9])]

def test_runs_leaving_are_packed(tmp_path):
    runs, out = tmp_path/'runs', tmp_path/'out'; out.mkdir()
    fake_run(runs, 'cut', 9, done=3)
    fake_run(runs, 'kept here', 9, done=0)
    res = history(runs, tmp_path/'records', '', '--pack', str(out))
    assert '2 run(s) cut short' in res.stdout and 'cut (3 of 9 epochs)' in res.stdout
    assert turns(runs/'cut'/'segments.jsonl') == [('cpu', [0, 3])]
    with tarfile.open(out/'partial-1.tgz') as t: assert sorted(t.getnames()) == ['cut/checkpoint.pth', 'cut/segments.jsonl', 'kept here/checkpoint.pth', 'kept here/segments.jsonl']

def cpu_sweep(commit:str, records:Path, runs:Path, pinned:Path)->subprocess.CompletedProcess:
    env = script_env(RUNS=str(runs), PINNED=str(pinned), CORE='0')
    return subprocess.run([str(ROOT/'.ci'/'cpu-sweep'), commit, str(records), *WHERE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)

@pytest.fixture(scope='module')
def pinned(tmp_path_factory):
    "A sweep with the code of this checkout's HEAD, from a worktree the script adds; the worktree is removed afterwards."
    if subprocess.run(['git', '-C', str(ROOT), 'rev-parse', 'HEAD'], capture_output=True).returncode: pytest.skip('not a git checkout')
    head = subprocess.run(['git', '-C', str(ROOT), 'rev-parse', 'HEAD'], capture_output=True, text=True).stdout.strip()
    tmp = tmp_path_factory.mktemp('cpu-sweep')
    res = cpu_sweep(head[:7], tmp/'records', tmp/'runs', tmp/'code')
    yield tmp, head, res
    subprocess.run(['git', '-C', str(ROOT), 'worktree', 'remove', '--force', str(tmp/'code')], capture_output=True)

def test_records_name_the_pinned_commit(pinned):
    tmp, head, res = pinned
    assert res.returncode == 0, res.stderr[-2000:]
    rec = json.loads((tmp/'records'/RUN/'metrics.json').read_text())
    assert rec['fingerprint']['commit'] == head
    assert (tmp/'runs'/RUN/'metrics.json').exists()

def test_a_leased_run_resumes_here_with_its_history(pinned, tmp_path):
    "A GPU lease's checkpoint unpacked into the runs folder: the sweep resumes it, and its history goes beside the record."
    tmp, head, _ = pinned
    runs = tmp_path/'runs'; shutil.copytree(tmp/'runs'/RUN, runs/RUN)
    (runs/RUN/'metrics.json').unlink()  # stopped after its last epoch's checkpoint, before its record
    (runs/RUN/'segments.jsonl').write_text(json.dumps(dict(device='cuda', epochs=[0, 1], of=1, date='2026-11-28')) + '\n')
    res = cpu_sweep(head[:7], tmp_path/'records', runs, tmp/'code')
    assert res.returncode == 0, res.stderr[-2000:]
    assert 'Resuming from checkpoint.pth: 1 of 1 epochs done.' in (runs/RUN/'log.txt').read_text()
    assert turns(tmp_path/'records'/RUN/'segments.jsonl') == [('cuda', [0, 1])]

def test_a_commit_that_is_not_the_checkout_is_refused(pinned, tmp_path):
    tmp, _, _ = pinned
    res = cpu_sweep('HEAD~1', tmp_path/'records', tmp_path/'runs', tmp/'code')  # the folder holds HEAD, not HEAD~1
    assert res.returncode == 1 and 'is not a checkout of HEAD~1' in res.stderr

def test_a_second_sweep_of_the_same_arguments_is_refused(tmp_path):
    "While a sweep of the same commit, records and arguments holds the lock (here: a process holding it, as a running sweep's does), another one exits at once."
    records, runs = tmp_path/'records', tmp_path/'runs'
    runs.mkdir()
    args = ['HEAD', str(records.resolve()), *WHERE]
    lock = runs/f".cpu-sweep-{hashlib.sha256(''.join(a + ' ' for a in args).encode()).hexdigest()[:16]}.lock"
    holder = subprocess.Popen(['flock', str(lock), 'sleep', '60'])
    try:
        for _ in range(50):
            if lock.exists(): break
            time.sleep(.1)
        res = subprocess.run([str(ROOT/'.ci'/'cpu-sweep'), *args], cwd=ROOT, env=script_env(RUNS=str(runs), PINNED=str(tmp_path/'never')),
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 1 and 'a sweep with these arguments runs already' in res.stderr, res.stderr
        assert not (tmp_path/'never').exists()  # refused before any worktree is made
    finally: holder.kill()

def test_a_block_runs_only_from_its_public_model(tmp_path):
    "A block folder naming its public model (public-model.sha256): refused without that file in the cache, let through with it."
    block, cache, plain = tmp_path/'block', tmp_path/'cache', tmp_path/'plain'
    for d in (cache/'pretrain', block/'records', plain/'dphpe'): d.mkdir(parents=True)  # plain: code in no git checkout
    (cache/'pretrain'/'public.pth').write_bytes(b'the public model')
    (block/'public-model.sha256').write_text(subprocess.run(['sha256sum', 'public.pth'], cwd=cache/'pretrain', capture_output=True, text=True).stdout)
    run = lambda: subprocess.run([str(ROOT/'.ci'/'cpu-sweep'), 'HEAD', str(block/'records'), *WHERE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                                 env=script_env(DPHPE_CACHE=str(cache), PINNED=str(plain), RUNS=str(tmp_path/'runs')))
    (cache/'pretrain'/'public.pth').write_bytes(b'another public model')
    res = run()
    assert res.returncode == 1 and 'names the public model the block' in res.stderr and 'does not hold it' in res.stderr, res.stderr
    (cache/'pretrain'/'public.pth').write_bytes(b'the public model')
    res = run()  # the model is there: on to the code, which is no checkout of HEAD, so it stops there
    assert res.returncode == 1 and 'names the public model' not in res.stderr and 'is not a checkout of HEAD' in res.stderr, res.stderr

def test_a_block_brings_its_public_model_to_a_new_cache(tmp_path):
    "A block keeping its public model (public-model/) starts on a machine whose cache lacks it: copied there, checked; another file of that name stays and is refused."
    block, cache = tmp_path/'block', tmp_path/'cache'/'pretrain'
    (block/'public-model').mkdir(parents=True)
    (block/'public-model'/'public.pth').write_bytes(b'the public model')
    (block/'public-model.sha256').write_text(subprocess.run(['sha256sum', 'public.pth'], cwd=block/'public-model', capture_output=True, text=True).stdout)
    guard = lambda: subprocess.run([str(ROOT/'.ci'/'public-model'), str(block/'records'), str(cache)], capture_output=True, text=True, timeout=60)
    res = guard()  # a new machine: no cache at all
    assert res.returncode == 0 and 'copied the block' in res.stderr and (cache/'public.pth').read_bytes() == b'the public model', res.stderr
    assert guard().stderr == ''  # there now: nothing to copy
    (cache/'public.pth').write_bytes(b'a model pretrained here')
    res = guard()
    assert res.returncode == 1 and 'does not hold it' in res.stderr and f"cp {block}/public-model/public.pth {cache}/" in res.stderr, res.stderr
    assert (cache/'public.pth').read_bytes() == b'a model pretrained here'  # left alone
    (cache/'public.pth').unlink(); (block/'public-model'/'public.pth').write_bytes(b'damaged')
    res = guard()
    assert res.returncode == 1 and 'is not the file' in res.stderr and not (cache/'public.pth').exists(), res.stderr

def test_no_python_is_refused_before_anything_starts(tmp_path):
    "A fresh checkout without .venv: the sweep and the queue refuse at once with the fix, instead of a queue that ends 'done' having failed every sweep."
    lanes, queue = tmp_path/'lanes', tmp_path/'queue'
    lanes.write_text(f"0  -  {tmp_path/'block'/'records'}  {' '.join(WHERE)}\n")
    env = script_env(PYTHON=str(tmp_path/'no-venv'/'python'), LANES=str(lanes), QUEUE=str(queue), RUNS=str(tmp_path/'runs'), PINNED=str(tmp_path/'never'))
    res = subprocess.run([str(ROOT/'.ci'/'cpu-sweep'), 'HEAD', str(tmp_path/'block'/'records'), *WHERE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and 'no Python at' in res.stderr and 'make setup' in res.stderr, res.stderr
    assert not (tmp_path/'never').exists() and not (tmp_path/'runs').exists()  # refused before any worktree or folder is made
    res = subprocess.run([str(ROOT/'.ci'/'cpu-queue')], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and 'no queue started' in res.stderr and not queue.exists(), res.stderr

def test_queue_runs_each_cores_sweeps_in_order(tmp_path):
    "`.ci/cpu-queue` starts one background queue per core; its sweeps run one after another, and a second start while it runs starts nothing."
    lanes, queue, records = tmp_path/'lanes', tmp_path/'queue', tmp_path/'block'/'records'
    lanes.write_text(f"# two sweeps of one block on core 0\n0  -  {records}  {' '.join(WHERE)}\n"
                     f"0  -  {records}  --preset tiny --where method=nonprivate features=raw seed=0\n")
    env = script_env(LANES=str(lanes), QUEUE=str(queue), RUNS=str(tmp_path/'runs'))
    start = lambda: subprocess.run([str(ROOT/'.ci'/'cpu-queue')], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert '2 sweep(s) queued' in start().stdout
    assert 'runs already' in start().stdout
    stop = lambda *core: subprocess.run([str(ROOT/'.ci'/'cpu-queue'), '--stop', *core], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert stop('1').stdout == '' and (queue/'cpu-queue-0.pgid').exists()  # another core's: nothing to stop
    log = queue/'cpu-queue-0.log'
    for _ in range(600):
        if 'queue done' in (log.read_text() if log.exists() else ''): break
        time.sleep(1)
    text = log.read_text()
    assert 'queue done' in text, text[-2000:]
    assert text.index(' '.join(WHERE)) < text.index('method=nonprivate')  # the file's order
    assert sorted(p.name for p in records.iterdir() if p.is_dir()) == [RUN, 'mpii-nonprivate-raw-finetune-s0']
    assert not (queue/'cpu-queue-0.pgid').exists()

def test_queue_stops(tmp_path):
    "`.ci/cpu-queue --stop CORE` stops that core's queue and every process of it (its run resumes at the next start)."
    lanes, queue = tmp_path/'lanes', tmp_path/'queue'
    lanes.write_text(f"0  -  {tmp_path/'block'/'records'}  --preset tiny --where method=nonprivate features=public seed=1\n")
    env = script_env(LANES=str(lanes), QUEUE=str(queue), RUNS=str(tmp_path/'runs'))
    subprocess.run([str(ROOT/'.ci'/'cpu-queue')], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    group = (queue/'cpu-queue-0.pgid').read_text().strip()
    res = subprocess.run([str(ROOT/'.ci'/'cpu-queue'), '--stop', '0'], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert 'stopped' in res.stdout and not (queue/'cpu-queue-0.pgid').exists()
    time.sleep(2)
    assert subprocess.run(['pgrep', '-g', group], capture_output=True).returncode == 1, 'a process of the stopped queue still runs'

def lane_runs(line:str)->set:
    "The names of the runs one line of `.ci/cpu-lanes` selects (`CORE COMMIT RECORDS SWEEP-ARGS…`), by this checkout's grid."
    from dphpe.cli import parser, where_filter
    from dphpe.experiment import run_name
    from dphpe.sweep import grid, select
    args = parser().parse_args(['sweep', *line.split()[3:]])
    return {run_name(p) for p in select(grid(args.preset, args.data, args.blocks), where_filter(args.where))}

def test_the_cpu_lanes_select_disjoint_runs():
    "Every line of `.ci/cpu-lanes` selects runs, and no run is in two lines (two queues would train it into one folder at once)."
    lines = [l for l in (ROOT/'.ci'/'cpu-lanes').read_text().splitlines() if l.strip() and not l.startswith('#')]
    seen = {}
    for line in lines:
        runs = lane_runs(line)
        assert runs, f"selects no run: {line}"
        twice = {r: seen[r] for r in runs if r in seen}
        assert not twice, f"{line}\nselects runs an earlier line does: {twice}"
        seen.update(dict.fromkeys(runs, line))
