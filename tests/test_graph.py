"""The private step captured as a CUDA graph (`dphpe.methods.graphed`) replays the eager step: the same weights after the
same steps, for every method, on a padded batch. GPU only: skipped with the reason on a CPU; `.ci/gpu-bench` runs this
file as a script on a GPU and keeps the differences it prints."""
import json, sys
import pytest, torch
from dphpe.model import pose_model, set_strategy, simcc_targets
from dphpe.methods import METHODS, PoseDPOptimizer, PublicSubspace, private_gradients, private_update, graphed

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

if __name__ == '__main__':  # on a GPU: print (and write to argv[1], if given) every method's difference
    res = {m: relative_difference(m) for m in METHODS}
    print(json.dumps(res))
    if len(sys.argv) > 1: open(sys.argv[1], 'w').write(json.dumps(res, indent=1))
