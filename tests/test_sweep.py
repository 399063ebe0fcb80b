"""The sweep survives being killed: a SIGKILLed sweep, run again, finishes the grid without redoing finished runs.
Also: its records, kept outside the runs folder, let a fresh runs folder skip every finished run; a failing run is
retried once and reported; and the report rebuilds its tables from the run directories, or from the kept records.
(`dphpe run`, one configuration, is tested in test_cli.py.)"""
import json, os, signal, subprocess, sys, time
from pathlib import Path
import pytest

DPHPE = [sys.executable, '-c', 'import sys; from dphpe.cli import main; sys.exit(main(sys.argv[1:]))']
WHERE = ['--where', 'method=nonprivate,dpsgd,feature']  # 4 tiny runs: 2 baselines and 2 private methods


def sweep_cmd(runs, *extra): return [*DPHPE, 'sweep', '--preset', 'tiny', '--runs', str(runs), '--jobs', '1', *WHERE, *extra]


def records_of(runs): return Path(runs).parent/'records'  # where the killed sweep keeps its records


def finished(runs): return {p.parent.name: (p.stat().st_mtime_ns, p.read_text()) for p in Path(runs).glob('*/metrics.json')}


@pytest.fixture(scope='module')
def killed_and_rerun(tmp_path_factory):
    "Start a sweep, SIGKILL its whole process group once a run has finished, then run the sweep again to the end."
    runs = tmp_path_factory.mktemp('sweep')/'runs'
    subprocess.run([*DPHPE, 'pretrain', '--preset', 'tiny', '--epochs', '1', '--pretrain-epochs', '1'], check=True, capture_output=True)  # data and model: not what is timed
    p = subprocess.Popen(sweep_cmd(runs, '--records', str(records_of(runs))), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while not finished(runs) and p.poll() is None and time.time() - t0 < 300: time.sleep(.2)
    time.sleep(1.5)  # let the next run get under way, so that the kill interrupts it
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    before = finished(runs)
    again = subprocess.run(sweep_cmd(runs, '--records', str(records_of(runs))), capture_output=True, text=True, timeout=600)
    return runs, before, again


def test_rerun_finishes_the_grid(killed_and_rerun):
    runs, before, again = killed_and_rerun
    assert again.returncode == 0, again.stdout + again.stderr
    assert 1 <= len(before) < 4, f"the kill should land mid-grid, found {len(before)} finished runs"
    after = finished(runs)
    assert len(after) == 4
    for name in after: assert json.loads(after[name][1])['finished']


def test_finished_runs_are_not_redone(killed_and_rerun):
    runs, before, again = killed_and_rerun
    after = finished(runs)
    for name, (mtime, text) in before.items(): assert after[name] == (mtime, text), f"{name} was rewritten"
    assert f"{len(before)} done, {4 - len(before)} to run" in again.stdout, again.stdout
    assert not list(Path(runs).glob('**/*.tmp')), "a temporary file was left behind"


def test_report_from_run_directories(killed_and_rerun, tmp_path):
    runs, *_ = killed_and_rerun
    r = subprocess.run([*DPHPE, 'report', '--runs', str(runs), '--out', str(tmp_path/'figs')], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    names = {f.name for f in (tmp_path/'figs').iterdir()}
    assert {'README.md', 'figure2.png'} <= names, names
    assert any(n.startswith('table1') and n.endswith('.md') for n in names), names
    assert 'SYNTHETIC' in ''.join((tmp_path/'figs'/n).read_text() for n in names if n.endswith('.md')).upper()
    card = json.loads((tmp_path/'figs'/'regime.json').read_text())  # the card of the runs' own preset (tiny), not the command's default
    assert card['preset'] == 'tiny' and card['strategies']['finetune']['N'] == 48 and 'start_pckh' in card['strategies']['finetune']


def test_records_outlive_the_runs_folder(killed_and_rerun, tmp_path):
    runs, *_ = killed_and_rerun
    kept = {p.parent.name: p.read_text() for p in records_of(runs).glob('*/metrics.json')}
    assert kept == {n: text for n, (_, text) in finished(runs).items()}  # every finished run's record, as written, also the killed sweep's
    fresh = subprocess.run(sweep_cmd(tmp_path/'fresh', '--records', str(records_of(runs))), capture_output=True, text=True, timeout=600)
    assert fresh.returncode == 0 and '4 finished record(s) restored' in fresh.stdout and '4 done, 0 to run' in fresh.stdout, fresh.stdout + fresh.stderr
    assert {n: t for n, (_, t) in finished(tmp_path/'fresh').items()} == kept
    for folder, extra in ((runs, []), (records_of(runs), ['--no-regime', '--plan', 'strategies'])):  # the report from the kept records alone gives the same tables
        r = subprocess.run([*DPHPE, 'report', '--runs', str(folder), '--out', str(tmp_path/folder.name), *extra], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    tables = lambda d: {f.name: f.read_text() for f in sorted((tmp_path/d).glob('table*.csv'))}
    assert tables('runs') and tables('runs') == tables('records')
    assert (tmp_path/'runs'/'regime.json').exists() and not (tmp_path/'records'/'regime.json').exists()  # --no-regime: no card measured
    assert (tmp_path/'records'/'verdicts.md').read_text().startswith('The predictions of figures/strategies/plan.md')  # --plan: the block's verdicts
    assert (tmp_path/'records'/'progress.md').read_text().startswith("The plan's steps in its order")  # and its progress, for the README
    ha = tmp_path/'humanart'  # --plan humanart: the gains over the start that regime.json holds, once it is there
    report_ha = lambda: subprocess.run([*DPHPE, 'report', '--runs', str(records_of(runs)), '--out', str(ha), '--no-regime', '--plan', 'humanart'], capture_output=True, text=True)
    r = report_ha()
    assert r.returncode == 0 and 'start_gains not written' in r.stdout and not (ha/'start_gains.md').exists(), r.stdout + r.stderr
    (ha/'regime.json').write_text(json.dumps({'strategies': {'finetune': {'start_ap': 18., 'start_box_pck': 69.7}}}))
    r = report_ha()
    assert r.returncode == 0 and (ha/'start_gains.md').read_text().endswith('No private Human-Art run has finished yet.\n'), r.stdout + r.stderr
    assert not (ha/'start_curves.png').exists()  # no private Human-Art run among these: no curve to draw
    bad = subprocess.run([*DPHPE, 'report', '--runs', str(runs), '--out', str(tmp_path/'bad'), '--plan', 'nope'], capture_output=True, text=True)
    assert bad.returncode != 0 and "Unknown plan 'nope'" in bad.stderr and not (tmp_path/'bad').exists(), bad.stderr


def test_failed_run_is_retried_once_and_reported(tmp_path):
    runs = tmp_path/'runs'
    bad = runs/'mpii-dpsgd-finetune-C0.01-eps0.8-s0'
    bad.mkdir(parents=True)
    (bad/'checkpoint.pth').write_text('not a checkpoint')  # every attempt of this run fails on it
    r = subprocess.run([*DPHPE, 'sweep', '--preset', 'tiny', '--runs', str(runs), '--where', 'method=dpsgd'], capture_output=True, text=True, timeout=600)
    assert r.returncode == 1
    assert '0 ran, 0 were done, 1 failed' in r.stdout and 'log.txt' in r.stdout, r.stdout
    assert (bad/'log.txt').read_text().count('=== ') == 2  # the first attempt and one retry
