"""The private step captured as a CUDA graph (`dphpe.methods.graphed`) replays the eager step: the same weights after the
same steps, for every method, on a padded batch; and a training run with graphed steps (`step_mode='graph'`) takes the
eager run's steps, noise included, and spends the same ε. GPU only: skipped with the reason on a CPU (the notebook
`09_methods` checks the graphed run's path there with a stand-in for the capture); `.ci/gpu-bench` runs this file as a
script on a GPU and keeps the differences it prints."""
import json, sys
import pytest, torch
from dphpe.model import pose_model, set_strategy, simcc_targets
from dphpe.methods import METHODS, PoseDPOptimizer, PublicSubspace, private_gradients, private_update, graphed, private_learner, pad_sizes

NO_GPU = "no CUDA GPU here: the graphed step is compared with the eager one on a GPU (`.ci/gpu-bench` runs this file)"

def weights_after(method:str, graph:bool, steps:int=4)->torch.Tensor:
    "The trainable weights after `steps` steps of `method` on one padded batch (6 persons, 2 padding rows), eager or graphed; σ = 0 so both take the same steps."
    torch.manual_seed(0)
    dev = torch.device('cuda')
    model = set_strategy(pose_model(), 'finetune').train().to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    x, joints = torch.randn(8, 3, 128, 96, device=dev), torch.rand(8, 16, 2, device=dev) * 90
    t, v, real = simcc_targets(joints, (128, 96), model.head.k), torch.ones(8, 16, device=dev), torch.arange(8, device=dev) < 6
    spec = METHODS[method]
    basis = PublicSubspace(4).fit(torch.randn(8, sum(p.numel() for p in params), device=dev)) if spec['project'] else None
    dp = PoseDPOptimizer(torch.optim.AdamW(params, lr=1e-3, capturable=graph), noise_multiplier=0., max_grad_norm=.01, expected_batch_size=8,
                         public_weight=spec['public_weight'], subspace=basis)
    public = (x.flip(-1), t, v) if spec['view'] else None  # a stand-in for ψ(x): any fixed input exercises the public pass
    def step(): private_update(dp, *private_gradients(model, x, t, v, .01, public, real=real, public_real=real if public else None, static=graph))
    if graph:
        replay = graphed(step, warmup=1)  # one eager warm-up step, then the replays
        for _ in range(steps - 1): replay()
    else:
        for _ in range(steps): step()
    torch.cuda.synchronize()
    return torch.cat([p.detach().flatten() for p in params])

def relative_difference(method:str)->float:
    "Largest difference between the graphed and the eager weights, relative to the largest eager weight."
    eager, graph = weights_after(method, False), weights_after(method, True)
    return float((graph - eager).abs().max() / eager.abs().max())

@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)
@pytest.mark.parametrize('method', list(METHODS))
def test_graphed_step_replays_the_eager_step(method):
    assert relative_difference(method) < 1e-4

def run_difference(method:str)->dict:
    "One epoch of `method` on the tiny synthetic set with graphed steps and with eager ones (both padded, σ > 0): the largest weight difference relative to the largest weight, and whether ε spent is the same."
    from dphpe.synth import make_synth
    from dphpe.data import load_mpii, PoseDataset
    from dphpe.features import make_splits
    from dphpe.train import fit_pose
    root = make_synth('tiny', progress=False)
    splits = make_splits(load_mpii(root/'mpii', 'train'), load_mpii(root/'mpii', 'valid'), m=16)
    def trained(mode):
        torch.manual_seed(0)
        crops = lambda persons: PoseDataset(persons, (128, 96))
        learn = private_learner(set_strategy(pose_model(), 'finetune'), crops(splits.private), crops(splits.valid), method, epochs=1, bs=8,
                                public=crops(splits.public), k=8, refresh=3, pad=pad_sizes(8), step_mode=mode)
        with learn.no_bar(), learn.no_logging(): fit_pose(learn, 1)
        return learn
    eager, graph = trained('eager'), trained('graph')
    a, b = (torch.cat([p.detach().flatten() for p in l.model.parameters()]) for l in (eager, graph))
    return {'weights': float((b - a).abs().max() / a.abs().max()), 'same_privacy': eager.privacy == graph.privacy,
            'graphs': len(graph.private_step.graphs.graphs)}

@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)
@pytest.mark.parametrize('method', list(METHODS))
def test_graphed_run_takes_the_eager_steps(method):
    r = run_difference(method)
    assert r['same_privacy'] and r['graphs'] >= 1
    assert r['weights'] < 1e-4, r  # the same noise: another noise seed moves them by about 1e-2 of the largest weight (measured on a CPU, 6 steps)

if __name__ == '__main__':  # on a GPU: print (and write to argv[1], if given) every method's step difference, then two runs'
    res = {m: relative_difference(m) for m in METHODS}
    print(json.dumps(res))
    if len(sys.argv) > 1: open(sys.argv[1], 'w').write(json.dumps(res, indent=1))
    res = {'steps': res, 'runs': {m: run_difference(m) for m in ('dpsgd', 'feature_projection')}}
    print(json.dumps(res))
    if len(sys.argv) > 1: open(sys.argv[1], 'w').write(json.dumps(res, indent=1))
