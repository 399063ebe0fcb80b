"""Every figure of the report, drawn headless (Agg) from a tiny fabricated run folder: Figure 2, the qualitative
poses, the public views, the horizon curves of the ablation, and the calibration figure of the regime card."""
import warnings
import matplotlib
matplotlib.use('Agg')
import pytest
from matplotlib.figure import Figure
from dphpe.synth import make_synth
from dphpe.report.fake_runs import fake_study, fake_ablation
from dphpe.report.collect import collect_runs
from dphpe.report.figures import figure2, qualitative, views, pose_row, load_predictions, valid_persons, save_figure, FIGURES
from dphpe.report.ablation import horizon_figure
from dphpe.regime import calibration_figure

@pytest.fixture(scope='module')
def study(tmp_path_factory):
    "The fabricated study of `dphpe.report.fake_runs` on the tiny synthetic dataset, collected."
    root = tmp_path_factory.mktemp('study')
    synth = make_synth('tiny', root=root/'synth', progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # its unfinished run and interrupted write
        return collect_runs(fake_study(root/'runs', synth))

@pytest.mark.parametrize('name', list(FIGURES))
def test_report_figures_are_written(study, name, tmp_path):
    fig = FIGURES[name](study)
    assert isinstance(fig, Figure) and 'SYNTHETIC' in fig.get_suptitle()
    path = save_figure(fig, tmp_path/name)
    assert path.read_bytes().startswith(b'\x89PNG')

def test_figure2_panels(study):
    fig = figure2(study)
    assert len(fig.axes) == 2 * 3  # strategies finetune, scratch × C 0.01, 0.1, 1
    assert figure2(study[study.method == 'nonprivate']) is None

def test_qualitative_and_views(study):
    assert len(qualitative(study, persons=(0, 5)).axes) == 2 * 3  # C = 0.1: ground truth, non-private, projection
    assert len(views(study, persons=(0,)).axes) == 3  # crop, blur, mask
    assert qualitative(study[study.dataset == 'humanart']) is None

def test_pose_row(study):
    import matplotlib.pyplot as plt
    run = study[(study.dataset == 'mpii') & (study.method == 'dpsgd')].iloc[0]
    valid = valid_persons(run.data_root)
    fig, axes = plt.subplots(1, 2)
    pose_row(axes, valid[0], 0, [(run, load_predictions(run.run_dir, len(valid)))])
    assert axes[1].get_title().startswith('DP-SGD')
    plt.close(fig)

def test_horizon_figure(tmp_path):
    ablation = collect_runs(fake_ablation(tmp_path/'runs'))
    fig = horizon_figure(ablation)
    assert [a.get_title() for a in fig.axes] == ['C = 0.01, ε = 0.8']
    assert save_figure(fig, tmp_path/'horizon.png').stat().st_size > 0

def test_calibration_figure(study, tmp_path):
    card = {'preset': 'tiny', 'strategies': {'finetune': {'start_pckh': 10.0}}}
    path = calibration_figure(card, study, tmp_path/'calibration.png')
    assert path.read_bytes().startswith(b'\x89PNG')
