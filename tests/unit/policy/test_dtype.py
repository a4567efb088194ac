"""`model.dtype: auto` on CPU: bfloat16 only where the CPU multiplies bfloat16 matrices natively
(AMX, AVX512-BF16), float32 elsewhere; and a bfloat16 base still trains on CPU with float32 LoRA."""

import pytest
import torch

from searchgrpo.config import ModelConfig
from searchgrpo.policy.model import cpu_dtype, cpu_flags, resolve_dtype

CPU = torch.device("cpu")
AVX2_ONLY = frozenset(["fpu", "sse", "sse2", "avx", "avx2", "fma", "f16c"])  # this project's 2-core AMD EPYC
SAPPHIRE_RAPIDS = AVX2_ONLY | {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"}
ZEN4 = AVX2_ONLY | {"avx512f", "avx512_bf16"}


@pytest.mark.parametrize(
    ("flags", "dtype"),
    [(AVX2_ONLY, "float32"), (AVX2_ONLY | {"avx512f"}, "float32"), (SAPPHIRE_RAPIDS, "bfloat16"), (ZEN4, "bfloat16")],
)
def test_auto_is_bfloat16_only_with_native_bfloat16_matrix_instructions(flags, dtype):
    assert cpu_dtype(flags) == dtype
    assert resolve_dtype(ModelConfig(dtype="auto"), CPU, flags) == getattr(torch, dtype)


def test_an_explicit_dtype_is_kept_whatever_the_cpu():
    assert resolve_dtype(ModelConfig(dtype="float32"), CPU, SAPPHIRE_RAPIDS) == torch.float32
    assert resolve_dtype(ModelConfig(dtype="bfloat16"), CPU, AVX2_ONLY) == torch.bfloat16


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\nflags\t: fpu\n")
    assert cpu_flags(info) == {"fpu", "avx2", "amx_bf16"}  # the first processor's
    info.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")  # Arm names them Features: no x86 flag
    assert cpu_dtype(cpu_flags(info)) == "float32"
    assert cpu_flags(tmp_path / "missing") == frozenset()  # not Linux: float32
