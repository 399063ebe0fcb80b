"Checkpoints load without running code: a crafted checkpoint is refused on every path that reads one (issue 43)."
import io, re, subprocess, sys
from pathlib import Path
import pytest, torch
from dphpe.train import CheckpointError, fit_pose
from dphpe.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]

class Payload:
    "Unpickling this runs `open(marker, 'w')`: the file appears if the reader ran the checkpoint's code."
    def __init__(self, marker): self.marker = marker
    def __reduce__(self): return (io.open, (str(self.marker), 'w'))

@pytest.fixture
def crafted(tmp_path):
    "A run folder whose checkpoint.pth would create `marker` when unpickled."
    run, marker = tmp_path/'run', tmp_path/'marker'
    run.mkdir()
    torch.save({'model': {}, 'epoch': 1, 'n_epoch': 2, 'meta': {}, 'opt': Payload(marker)}, run/'checkpoint.pth')
    return run/'checkpoint.pth', marker

def test_cli_refuses_in_one_line(crafted):
    ck, marker = crafted
    rc, out, err = run_cli('checkpoint', str(ck))
    assert (rc, out) == (2, '') and err.count('\n') == 1 and 'Traceback' not in err
    assert f"{ck} holds io.open, which no dphpe checkpoint holds" in err and 'do not trust it' in err
    rc, out, err = run_cli('checkpoint', str(ck), '--convert')  # converting is no way round the check
    assert rc == 2 and 'it is not converted' in err
    assert not marker.exists()

def test_resume_refuses(crafted):
    "A sweep that finds the crafted file where its run's checkpoint belongs stops with the error and runs nothing."
    ck, marker = crafted
    with pytest.raises(CheckpointError, match='do not trust it'): fit_pose(None, 2, checkpoint=ck)
    assert not marker.exists()

def test_fresh_process_refuses(crafted):
    "The same in a fresh interpreter: nothing imported by the test could have allowed the payload."
    ck, marker = crafted
    r2 = subprocess.run([sys.executable, '-c', f"from dphpe.train import read_checkpoint; read_checkpoint({str(ck)!r})"], capture_output=True, text=True)
    assert r2.returncode != 0 and 'CheckpointError' in r2.stderr
    assert not marker.exists()

def test_no_unsafe_load_in_source():
    "No `weights_only=False` anywhere in the package or the notebooks."
    hits = [f"{p.relative_to(ROOT)}" for p in [*ROOT.glob('dphpe/**/*.py'), *ROOT.glob('nbs/**/*.ipynb')]
            if re.search(r'weights_only\s*=\s*False', p.read_text())]
    assert hits == [], hits
