"The installed package, imported as users import it: noise calibration against an independent accountant, and the private step."
import json, shutil, subprocess, sys
from pathlib import Path
import pytest, torch
from dp_accounting import PoissonSampledDpEvent, GaussianDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import RdpAccountant
from dphpe.privacy import PrivacyPlan
from dphpe.model import pose_model, set_strategy, per_sample_grads, simcc_targets

DPHPE = shutil.which('dphpe', path=str(Path(sys.executable).parent))

def independent_rdp_epsilon(sigma, q, steps, delta):
    acc = RdpAccountant()
    acc.compose(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(delta)

@pytest.mark.parametrize('epsilon', [0.2, 0.4, 0.6, 0.8])
def test_sigma_reproduces_target_under_independent_accountant(epsilon):
    q, steps = 32 / 2900, 10 * 90
    plan = PrivacyPlan.calibrate(epsilon, 4e-5, q, steps)
    assert abs(independent_rdp_epsilon(plan.sigma, q, steps, 4e-5) - epsilon) <= 0.01 * epsilon

def test_noise_command_json():
    r = subprocess.run([DPHPE, 'noise', '--epsilon', '0.8', '--sample-rate', '0.011', '--epochs', '5', '--json'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec['steps'] == round(5 / 0.011)
    assert abs(independent_rdp_epsilon(rec['sigma'], 0.011, rec['steps'], 4e-5) - 0.8) <= 0.008

def test_noise_command_bad_input():
    r = subprocess.run([DPHPE, 'noise', '--epsilon', '-1', '--sample-rate', '0.01', '--epochs', '1'], capture_output=True, text=True)
    assert r.returncode == 2 and 'epsilon must be a positive' in r.stderr and 'Traceback' not in r.stderr

def test_per_sample_grads_from_the_module():
    "`dphpe.model.per_sample_grads` works outside its notebook (its imports are exported)."
    m = set_strategy(pose_model(), 'finetune').train()
    x, j = torch.rand(2, 3, 128, 96), torch.rand(2, 16, 2) * 90
    g, l = per_sample_grads(m, x, simcc_targets(j, (128, 96)), torch.ones(2, 16), with_loss=True)
    assert l.shape == (2,) and all(v.shape[0] == 2 for v in g.values())
