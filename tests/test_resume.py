"Kill a real training process after an epoch, resume it, and get exactly the uninterrupted run's result."
import os, shutil, signal, subprocess, sys, time
from pathlib import Path
import pytest, torch

DPHPE = shutil.which('dphpe', path=str(Path(sys.executable).parent))
EPOCHS = 6

def pretrain_cmd(cache): return [DPHPE, 'pretrain', '--preset', 'tiny', '--pretrain-epochs', str(EPOCHS), '--cache', str(cache)]

@pytest.fixture(scope='module')
def env(tmp_path_factory):
    "A private cache (synthetic tiny data made once, shared by the runs) and single-threaded, deterministic torch."
    e = dict(os.environ, DPHPE_CACHE=str(tmp_path_factory.mktemp('cache')), OMP_NUM_THREADS='1')
    return e

def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return r

def artefact(cache): return next(Path(cache).glob('coco-*.pth'))

def test_kill_and_resume_equals_uninterrupted(env, tmp_path):
    whole, killed = tmp_path/'whole', tmp_path/'killed'
    run(pretrain_cmd(whole), env)
    # the same run, killed (SIGKILL: no cleanup) as soon as its first epoch's checkpoint exists
    p = subprocess.Popen(pretrain_cmd(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not list(killed.glob('*.partial')) and p.poll() is None and time.time() < deadline: time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    partial = list(killed.glob('*.partial'))
    assert partial, 'the run ended before writing its first checkpoint'
    done = torch.load(partial[0], weights_only=True)['epoch']
    assert 1 <= done < EPOCHS, f"killed after {done} of {EPOCHS} epochs: nothing left to resume"
    r = run(pretrain_cmd(killed), env)  # resume
    assert "Resuming from" in r.stdout and f"{done} of {EPOCHS} epochs done" in r.stdout
    a, b = (torch.load(artefact(d), weights_only=True) for d in (whole, killed))
    assert len(b['history']) == EPOCHS and len(b['epoch_seconds']) == EPOCHS
    assert torch.allclose(torch.tensor(a['history']), torch.tensor(b['history']), rtol=0, atol=1e-6), (a['history'], b['history'])
    for k in a['model']: assert torch.allclose(a['model'][k], b['model'][k], atol=1e-6), k
    assert not list(killed.glob('*.partial')), 'the partial checkpoint is removed once the artefact is written'

def test_cached_artefact_is_not_retrained(env, tmp_path):
    run(pretrain_cmd(tmp_path), env)
    before = artefact(tmp_path).stat().st_mtime_ns
    r = run(pretrain_cmd(tmp_path), env)
    assert 'pretrained checkpoint:' in r.stdout and 'Resuming' not in r.stdout
    assert artefact(tmp_path).stat().st_mtime_ns == before
