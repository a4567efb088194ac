"""`model.fused_norms`: the RMS norms as torch's `rms_norm` compute transformers' function (values and
gradients), and only on CUDA (searchgrpo/policy/fused_norms.py)."""

import torch

from searchgrpo.policy.fused_layout import is_rms_norm
from searchgrpo.policy.fused_norms import fused_rms_norm_forward, use_fused_norms
from searchgrpo.policy.model import load_policy
from tests.helpers.tiny import tiny_config


def test_the_fused_norms_compute_transformers_function_and_its_gradients(tmp_path):
    plain = load_policy(tiny_config(tmp_path)).model
    fused = load_policy(tiny_config(tmp_path)).model
    norms = [m for m in fused.modules() if is_rms_norm(m)]
    assert norms and not any("forward" in vars(m) for m in norms)  # on the CPU: left as they are
    torch.manual_seed(0)
    for m in norms:  # norms start at weight 1: make the weight's place in the function visible
        with torch.no_grad():
            m.weight.uniform_(0.5, 1.5)
            dict(plain.named_modules())[next(n for n, x in fused.named_modules() if x is m)].weight.copy_(m.weight)
    assert use_fused_norms(fused) == len(norms)
    assert all(m.forward.__func__ is fused_rms_norm_forward for m in norms)
    ids = torch.tensor([[5, 17, 300, 42, 8, 99]])
    out = {}
    for name, model in (("plain", plain), ("fused", fused)):
        model.zero_grad()
        logits = model(input_ids=ids).logits
        logits.logsumexp(-1).sum().backward()
        out[name] = (logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    torch.testing.assert_close(out["fused"][0], out["plain"][0], rtol=1e-5, atol=1e-5)
    for n, g in out["plain"][1].items():
        torch.testing.assert_close(out["fused"][1][n], g, rtol=1e-4, atol=1e-6)
