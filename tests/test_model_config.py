"""The model configs: the presets are the published geometries, and a config that cannot be a decoder
is refused with every problem named."""

import pytest

from py_runtime.models.config import AWKWARD, LLAMA_3_2_1B, MODELS, QWEN3_0_6B, ModelConfig, model_config


def test_presets_carry_the_published_geometries():
    # meta-llama/Llama-3.2-1B and Qwen/Qwen3-0.6B config.json
    assert (LLAMA_3_2_1B.hidden, LLAMA_3_2_1B.intermediate, LLAMA_3_2_1B.layers, LLAMA_3_2_1B.heads,
            LLAMA_3_2_1B.kv_heads, LLAMA_3_2_1B.head_dim, LLAMA_3_2_1B.vocab) == (2048, 8192, 16, 32, 8, 64, 128256)
    assert (QWEN3_0_6B.hidden, QWEN3_0_6B.intermediate, QWEN3_0_6B.layers, QWEN3_0_6B.heads,
            QWEN3_0_6B.kv_heads, QWEN3_0_6B.head_dim, QWEN3_0_6B.vocab) == (1024, 3072, 28, 16, 8, 128, 151936)
    assert QWEN3_0_6B.qk_norm and not LLAMA_3_2_1B.qk_norm and LLAMA_3_2_1B.rope_scaling is not None


def test_projection_shapes_follow_the_heads():
    assert QWEN3_0_6B.linears() == {"q": (1024, 2048), "kv": (1024, 1024), "o": (2048, 1024),
                                    "gate_up": (1024, 3072), "down": (3072, 1024), "lm_head": (1024, 151936)}
    assert [name for name, _, _ in LLAMA_3_2_1B.linear_shapes()] == ["q_o", "kv", "gate_up", "down", "lm_head"]
    assert LLAMA_3_2_1B.qkv_shape() == (2048, 2048, 512) and LLAMA_3_2_1B.group == 4


def test_awkward_misses_the_shape_specific_geometries():
    assert (AWKWARD.heads, AWKWARD.kv_heads, AWKWARD.head_dim) == (12, 4, 80)
    fast = {(32, 8, 64), (16, 8, 128)}          # the Llama K16 and Qwen3 attention geometries
    assert (AWKWARD.heads, AWKWARD.kv_heads, AWKWARD.head_dim) not in fast
    assert all(k % 64 == 0 for k, _ in AWKWARD.linears().values())      # still Q4 group-size 64 friendly


def test_depth_override_keeps_the_geometry():
    shallow = model_config("llama", layers=2)
    assert shallow.layers == 2 and shallow.linears() == LLAMA_3_2_1B.linears()
    assert model_config("qwen3") is QWEN3_0_6B and set(MODELS) == {"llama", "qwen3", "tiny", "awkward"}


def test_bad_configs_name_every_problem():
    with pytest.raises(ValueError, match="unknown model 'gpt'.*awkward"):
        model_config("gpt")
    fields = dict(key="bad", name="bad", vocab=10, hidden=64, intermediate=128, layers=1, heads=6, kv_heads=4,
                  head_dim=15, rope_layout="spiral", rope_theta=1e4, rope_scaling=None, norm_eps=1e-6,
                  qk_norm=False, tied_embeddings=True)
    with pytest.raises(ValueError) as error:
        ModelConfig(**fields)
    message = str(error.value)
    for fragment in ("6 query heads do not divide into 4 KV heads", "even head_dim, not 15", "'spiral'"):
        assert fragment in message
    with pytest.raises(ValueError, match="layers must be positive"):
        ModelConfig(**{**fields, "heads": 4, "head_dim": 16, "rope_layout": "half", "layers": 0})
