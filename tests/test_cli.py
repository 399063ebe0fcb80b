"The installed `dphpe` console script, run as a user runs it: exit codes, JSON output and one-line errors."
import json, shutil, subprocess, sys
from pathlib import Path
import numpy as np, pytest
from scipy.io import loadmat, savemat

DPHPE = shutil.which('dphpe', path=str(Path(sys.executable).parent))

def dphpe(*args):
    return subprocess.run([DPHPE, *map(str, args)], capture_output=True, text=True, timeout=300)

@pytest.fixture(scope='module')
def synth_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('cli')/'synth'
    r = dphpe('data', 'synth', '--preset', 'tiny', '--root', root, '--json')
    assert r.returncode == 0, r.stderr
    return root, json.loads(r.stdout)

def test_script_installed(): assert DPHPE, 'the dphpe console script is not installed in this environment'

def test_data_synth_json(synth_root):
    root, out = synth_root
    assert out['root'] == str(root)
    assert out['counts']['mpii/train'] == 64 and out['counts']['mpii/valid'] == 24

def test_pckh_perfect_and_shifted(synth_root, tmp_path):
    gt = synth_root[0]/'mpii'/'annot'/'gt_valid.mat'
    m = loadmat(gt)
    preds = m['pos_gt_src'].transpose(2, 0, 1).astype(float)
    np.save(tmp_path/'p.npy', preds)
    r = dphpe('pckh', tmp_path/'p.npy', '--gt', gt, '--json')
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert list(res) == ['Head', 'Shoulder', 'Elbow', 'Wrist', 'Hip', 'Knee', 'Ankle', 'Mean', 'Mean@0.1']
    assert res['Mean'] == 100.0
    # shift every prediction by 0.3 head sizes: correct at thr 0.5, wrong at 0.1 (hand-computed expectation)
    hb = m['headboxes_src']
    head = 0.6*np.linalg.norm(hb[1] - hb[0], axis=0)
    savemat(tmp_path/'s.mat', {'preds': preds + np.stack([0.3*head, 0*head], -1)[:, None, :]})
    res = json.loads(dphpe('pckh', tmp_path/'s.mat', '--gt', gt, '--json').stdout)
    assert res['Mean'] == 100.0 and res['Mean@0.1'] == 0.0
    res = json.loads(dphpe('pckh', tmp_path/'s.mat', '--gt', gt, '--thr', '0.2', '--json').stdout)
    assert res['Mean'] == 0.0

@pytest.mark.parametrize('pred, msg', [('missing.mat', 'missing.mat'), ('bad.npy', 'shape')])
def test_pckh_errors_are_one_line(synth_root, tmp_path, pred, msg):
    np.save(tmp_path/'bad.npy', np.zeros((3, 16, 2)))
    r = dphpe('pckh', tmp_path/pred, '--gt', synth_root[0]/'mpii'/'annot'/'gt_valid.mat')
    assert r.returncode == 2
    assert r.stderr.startswith('dphpe: error:') and 'Traceback' not in r.stderr and msg in r.stderr

def test_unknown_preset_is_clear():
    r = dphpe('data', 'synth', '--preset', 'huge')
    assert r.returncode == 2 and 'Traceback' not in r.stderr and 'huge' in r.stderr

def test_regime_json_quick_without_measuring():
    "The quick preset's regime card: the regime targets of the preset design, checked against the paper's card."
    r = dphpe('regime', '--preset', 'quick', '--json', '--no-measure')
    if r.returncode and 'not found' in r.stderr: pytest.skip(f'quick data not available: {r.stderr.strip()}')
    assert r.returncode == 0, r.stderr
    card = json.loads(r.stdout)
    ours, paper = card['strategies']['finetune'], card['paper']['finetune']
    assert card['preset'] == 'quick' and paper['T'] == 17_300 and paper['p'] == 3_331_364
    assert ours['T'] >= 1000 and ours['n_over_sqrt_p'] >= 6
    for e in ('0.2', '0.8'): assert 0.5 <= ours['run_snr'][e] / paper['run_snr'][e] <= 2
    assert 0.5 <= ours['q_sqrt_T'] / paper['q_sqrt_T'] <= 2

def test_regime_unknown_preset():
    r = dphpe('regime', '--preset', 'huge', '--no-measure')
    last = r.stderr.strip().splitlines()[-1]  # torch may print a deprecation warning first
    assert r.returncode == 2 and last.startswith("dphpe: error: Unknown preset 'huge'") and 'Traceback' not in r.stderr

def test_dphpe_run_one_configuration(tmp_path):
    r = dphpe('run', '-p', 'preset', 'tiny', '-p', 'method', 'feature_projection', '-p', 'epsilon', '0.2', '--out', tmp_path/'one')
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path/'one'/'metrics.json').read_text())
    assert (m['params']['method'], m['params']['epsilon']) == ('feature_projection', 0.2)
    assert m['privacy']['epsilon_rdp'] <= 0.2 * 1.001 and 'epsilon spent' in r.stdout
    nb = json.loads((tmp_path/'one'/'run.ipynb').read_text())
    assert nb['metadata']['papermill']['parameters']['epsilon'] == 0.2  # papermill saved the executed notebook beside the results

def test_dphpe_run_failure_is_one_line(tmp_path):
    (tmp_path/'bad').mkdir()
    (tmp_path/'bad'/'checkpoint.pth').write_text('not a checkpoint')
    r = dphpe('run', '-p', 'preset', 'tiny', '-p', 'method', 'dpsgd', '--out', tmp_path/'bad')
    assert r.returncode == 2 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    err = r.stderr.strip().splitlines()[-1]  # (lines above it: library warnings at import)
    assert err.startswith('dphpe: error: run mpii-dpsgd-finetune-C0.01-eps0.8-s0 failed: CheckpointError'), r.stderr
    assert str(tmp_path/'bad'/'log.txt') in err and 'Traceback' in (tmp_path/'bad'/'log.txt').read_text()
