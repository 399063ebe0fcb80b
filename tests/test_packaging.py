"""An installed wheel of dphpe runs an experiment without a checkout: the experiment notebook ships as package data."""
import json, os, shutil, subprocess, sys, zipfile
from pathlib import Path
import pytest

REPO = Path(__file__).parents[1]


@pytest.fixture(scope='module')
def wheel(tmp_path_factory)->Path:
    "A wheel of this checkout, built with the setuptools already installed (no download)."
    out, src = tmp_path_factory.mktemp('wheel'), tmp_path_factory.mktemp('source')/'dphpe'
    skip = shutil.ignore_patterns('.git', '.venv', 'runs', 'build', 'dist', '*.egg-info', '_proc', '_docs', '__pycache__')
    shutil.copytree(REPO, src, ignore=skip)  # a clean copy: setuptools builds in the source folder (build/), which stays untouched
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps', '--no-build-isolation', '-w', str(out), str(src)],
                   check=True, capture_output=True, text=True)
    return next(out.glob('dphpe-*.whl'))


def test_wheel_holds_the_experiment_notebook(wheel):
    with zipfile.ZipFile(wheel) as z:
        assert z.read('dphpe/experiment.ipynb') == (REPO/'nbs'/'10_experiment.ipynb').read_bytes()


def test_installed_wheel_runs_without_checkout(wheel, tmp_path):
    site = tmp_path/'site'
    subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps', '--target', str(site), str(wheel)],
                   check=True, capture_output=True, text=True)
    cli = 'import sys; from dphpe.cli import main; sys.exit(main(sys.argv[1:]))'
    env = {**os.environ, 'PYTHONPATH': str(site)}  # the wheel's copy comes first; the cwd is not the checkout
    env.pop('DPHPE_EXPERIMENT_NOTEBOOK', None)
    where = subprocess.run([sys.executable, '-c', 'from dphpe.runner import experiment_notebook; print(experiment_notebook())'],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where) == site/'dphpe'/'experiment.ipynb'
    run = subprocess.run([sys.executable, '-c', cli, 'run', '-p', 'preset', 'tiny', '-p', 'method', 'dpsgd', '-p', 'epsilon', '0.8',
                          '--runs', str(tmp_path/'runs')], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    m = json.loads(next((tmp_path/'runs').glob('tiny/*/metrics.json')).read_text())
    assert m['params']['method'] == 'dpsgd' and m['privacy']['epsilon_rdp'] <= 0.8
