"""`dphpe sweep --backend slurm` against a real single-node Slurm (`.ci/slurm-up` starts one from Debian's packages, with the
accounting submitit reads job states from). Marked `slurm`, and skipped, with the reason, where no such Slurm answers."""
import json, shutil, subprocess, sys, time
import pytest

DPHPE = [sys.executable, '-c', 'import sys; from dphpe.cli import main; sys.exit(main(sys.argv[1:]))']
TWO = ['--where', 'method=dpsgd,nonprivate', 'features=raw']  # two tiny runs: DP-SGD and the raw non-private baseline


def why_no_slurm()->str:
    "Why the Slurm tests cannot run here ('' if they can)."
    if not shutil.which('sbatch'): return "no Slurm here (sbatch not found); start a single-node one with `.ci/slurm-up` (as root)"
    ping = subprocess.run(['scontrol', 'ping'], capture_output=True, text=True)
    if 'is UP' not in ping.stdout: return f"no slurmctld answers (`scontrol ping`: {(ping.stdout or ping.stderr).strip()}); start it with `.ci/slurm-up`"
    if subprocess.run(['sacct', '-X', '-n'], capture_output=True).returncode: return "sacct does not answer: submitit reads job states from Slurm's accounting (`.ci/slurm-up` sets it up)"
    return ''


pytestmark = [pytest.mark.slurm, pytest.mark.skipif(bool(why_no_slurm()), reason=why_no_slurm() or 'Slurm is up')]


def dphpe(*args, timeout=900): return subprocess.run([*DPHPE, *args], capture_output=True, text=True, timeout=timeout)


def test_sweep_as_a_slurm_job_array(tmp_path):
    runs = tmp_path/'runs'
    r = dphpe('sweep', '--preset', 'tiny', '--runs', str(runs), *TWO, '--backend', 'slurm', '--cpus-per-run', '1', '--jobs', '2', '--time-min', '30')
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert '2 ran, 0 were done, 0 failed' in r.stdout, r.stdout
    ledger = json.loads((runs/'.submitit'/'jobs.json').read_text())
    assert set(ledger) == {'mpii-dpsgd-finetune-C0.01-eps0.8-s0', 'mpii-nonprivate-raw-finetune-s0'}
    states = subprocess.run(['sacct', '-X', '-n', '-P', '-o', 'JobID,State', '-j', ','.join(ledger.values())], capture_output=True, text=True).stdout
    assert {l.split('|')[0]: l.split('|')[1] for l in states.split()} == {j: 'COMPLETED' for j in ledger.values()}, states
    for name in ledger: assert json.loads((runs/name/'metrics.json').read_text())['finished']
    again = dphpe('sweep', '--preset', 'tiny', '--runs', str(runs), *TWO, '--backend', 'slurm')
    assert again.returncode == 0 and '2 done, 0 to run' in again.stdout, again.stdout  # nothing submitted again


def test_submitted_then_followed(tmp_path):
    runs, one = tmp_path/'runs', ['--where', 'method=maskdp']
    r = dphpe('sweep', '--preset', 'tiny', '--runs', str(runs), *one, '--backend', 'slurm', '--cpus-per-run', '1', '--no-wait')
    assert r.returncode == 0 and '1 runs submitted' in r.stdout, r.stdout + r.stderr[-3000:]
    status = dphpe('sweep', '--preset', 'tiny', '--runs', str(runs), *one, '--status').stdout
    assert 'PENDING:' in status or 'RUNNING:' in status or 'done:' in status, status
    if 'done:' not in status:  # still queued: a second submission leaves it alone
        again = dphpe('sweep', '--preset', 'tiny', '--runs', str(runs), *one, '--backend', 'slurm', '--no-wait')
        assert '0 to run (on slurm, 1 still queued)' in again.stdout or '1 done' in again.stdout, again.stdout
    t0 = time.time()
    while 'done:' not in status and time.time() - t0 < 900:
        time.sleep(5)
        status = dphpe('sweep', '--preset', 'tiny', '--runs', str(runs), *one, '--status').stdout
    assert 'done:    1' in status, status
    assert json.loads((runs/'mpii-maskdp-finetune-C0.01-eps0.8-s0'/'metrics.json').read_text())['privacy']['epsilon_rdp'] <= 0.8
