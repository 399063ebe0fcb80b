"""`.ci/gpu-sweep`, the script that sweeps an embedded preset on a lent GPU machine, checked on this machine's CPU (`GPUS=`
empty): the records of the runs it finished come back in `records.tgz`, kept records are not run again, and at its
deadline it stops the sweep and every run it started, returning no record of a run cut short; a run cut short after a
checkpoint comes back as its checkpoint, and the next call resumes it."""
import json, os, shutil, subprocess, sys, tarfile, time
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
WHERE = ['--preset', 'tiny', '--where', 'method=dpsgd', 'seed=0']  # one run of the tiny grid

def gpu_sweep(records:Path, out:Path, deadline:int, *args, env:dict=None):
    "Run `.ci/gpu-sweep` on this CPU with this python; return the finished process."
    env = {**os.environ, 'GPUS': '', 'NO_WHEELS': '1', 'PYTHON': sys.executable, 'OUT': str(out), 'DEADLINE': str(deadline), 'OMP_NUM_THREADS': '1',
           'WORK': f'{out}-work', 'DPHPE_CACHE': os.environ.get('DPHPE_CACHE', str(Path.home()/'.cache'/'dphpe')), **(env or {})}  # the data and pretraining other tests cache
    return subprocess.run([str(ROOT/'.ci'/'gpu-sweep'), str(records), *args, '--jobs', '1'], cwd=ROOT, env=env, capture_output=True, text=True, timeout=deadline + 120)

def members(tgz:Path)->list: return sorted(m.name for m in tarfile.open(tgz).getmembers() if m.isfile())

@pytest.fixture(scope='module')
def swept(tmp_path_factory):
    "A first sweep into an empty records folder, then its records unpacked there and the same sweep again."
    tmp = tmp_path_factory.mktemp('gpu-sweep')
    records = tmp/'records'; records.mkdir()
    first = gpu_sweep(records, tmp/'first', 600, *WHERE)
    with tarfile.open(tmp/'first'/'records.tgz') as t: t.extractall(records)
    again = gpu_sweep(records, tmp/'again', 600, *WHERE)
    return tmp, first, again

def test_finished_runs_come_back(swept):
    tmp, first, _ = swept
    assert first.returncode == 0, first.stderr[-2000:]
    assert members(tmp/'first'/'records.tgz') == ['mpii-dpsgd-finetune-C0.01-eps0.8-s0/metrics.json']
    rec = json.loads((tmp/'records'/'mpii-dpsgd-finetune-C0.01-eps0.8-s0'/'metrics.json').read_text())
    made = json.loads((tmp/'first'/'data.json').read_text())
    assert rec['fingerprint']['code'] == made['code'] and rec['fingerprint']['data'] in made['data'].values()

def test_kept_records_are_not_run_again(swept):
    tmp, _, again = swept
    assert again.returncode == 0, again.stderr[-2000:]
    assert members(tmp/'again'/'records.tgz') == []
    assert '0 ran, 1 were done' in (tmp/'again'/'sweep.txt').read_text()

def test_deadline_stops_every_process(tmp_path):
    records = tmp_path/'records'; records.mkdir()
    gpu_sweep(records, tmp_path/'out', 20, *WHERE)  # stopped before the run can end (a script that hangs fails gpu_sweep's timeout)
    assert 'deadline: the sweep is stopped' in (tmp_path/'out'/'sweep.txt').read_text()
    assert members(tmp_path/'out'/'records.tgz') == [], 'a run cut short left a record'
    time.sleep(1)
    left = subprocess.run(['pgrep', '-f', f"{tmp_path/'out'}-work"], capture_output=True, text=True).stdout.split()
    assert not left, f'processes of the stopped sweep still run: {left}'

def test_cut_short_run_resumes_from_its_checkpoint(swept, tmp_path):
    "A run stopped after a checkpoint comes back in partial-1.tgz; carried to the next call (PARTIAL), it resumes there and finishes with the same scores."
    tmp, _, _ = swept
    run = 'mpii-dpsgd-finetune-C0.01-eps0.8-s0'
    cut = tmp_path/'cut-work'/'runs'
    shutil.copytree(tmp/'first-work'/'runs'/run, cut/run)
    (cut/run/'metrics.json').unlink()  # as if stopped after its last epoch's checkpoint, before its record
    records = tmp_path/'records'; records.mkdir()
    gpu_sweep(records, tmp_path/'cut', 15, *WHERE)  # the deadline stops the sweep before it starts any run
    assert members(tmp_path/'cut'/'records.tgz') == []
    assert members(tmp_path/'cut'/'partial-1.tgz') == [f'{run}/checkpoint.pth', f'{run}/segments.jsonl']
    assert '1 run(s) cut short' in (tmp_path/'cut'/'sweep.txt').read_text()
    env = {'PARTIAL': str(tmp_path/'cut')}
    resumed = gpu_sweep(records, tmp_path/'resumed', 600, *WHERE, env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert 'Resuming from checkpoint.pth: 1 of 1 epochs done.' in (tmp_path/'resumed-work'/'runs'/run/'log.txt').read_text()
    assert members(tmp_path/'resumed'/'records.tgz') == [f'{run}/metrics.json', f'{run}/segments.jsonl']
    with tarfile.open(tmp_path/'resumed'/'records.tgz') as t: t.extractall(tmp_path/'back')
    before, after = (json.loads((d/run/'metrics.json').read_text()) for d in (tmp/'records', tmp_path/'back'))
    assert after['scores'] == before['scores'] and after['privacy'] == before['privacy']
    segs = [json.loads(l) for l in (tmp_path/'back'/run/'segments.jsonl').read_text().splitlines()]
    assert [s['epochs'] for s in segs] == [[0, 1]] and segs[0]['device'] == 'cpu'
