"""triton.Config lists written by `autotune export --format triton` from sqlite:////root/out/n/nightly.db at 2026-12-03T03:07:48.680419+00:00.

@triton.autotune(configs=configs("KERNEL"), key=[...])
"""

import triton

# kernel -> device -> shape -> triton.Config keyword arguments, fastest first
_RECORDS = {
    "gemm_fp8": {
        "NVIDIA H200": {
            "M=64,N=2112,K=7168": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 8,
                        "SPLIT_REDUCE": "atomic",
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 8,
                        "SPLIT_REDUCE": "atomic",
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
            ],
            "M=64,N=24576,K=1536": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 64,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": True,
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 64,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 4,
                    "num_stages": 3,
                },
            ],
            "M=64,N=32768,K=512": [
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 64,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 4,
                    "num_stages": 3,
                },
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 1,
                        "USE_TMA": False,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
            ],
            "M=64,N=7168,K=16384": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 256,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 8,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 4,
                    "num_stages": 2,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 256,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 8,
                        "SPLIT_REDUCE": "atomic",
                    },
                    "num_warps": 4,
                    "num_stages": 2,
                },
            ],
            "M=64,N=4096,K=7168": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 4,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 4,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
            ],
            "M=64,N=7168,K=2048": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 64,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 2,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 4,
                    "num_stages": 5,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 256,
                        "BLOCK_K": 64,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 4,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
            ],
            "M=128,N=2112,K=7168": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 64,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 2,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 8,
                    "num_stages": 6,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 8,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 8,
                    "num_stages": 2,
                },
            ],
            "M=128,N=24576,K=1536": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 1,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
            ],
            "M=128,N=32768,K=512": [
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 1,
                        "USE_TMA": False,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 1,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
            ],
            "M=128,N=7168,K=16384": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": True,
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
            ],
            "M=128,N=4096,K=7168": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 2,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 2,
                        "SPLIT_REDUCE": "kernel",
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
            ],
            "M=128,N=7168,K=2048": [
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 128,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 64,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 64,
                        "BLOCK_K": 256,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
            ],
            "M=4096,N=2112,K=7168": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 256,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
            ],
            "M=4096,N=24576,K=1536": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 64,
                        "GROUP_M": 1,
                        "FLATTEN": True,
                        "TMA_STORE": True,
                    },
                    "num_warps": 8,
                    "num_stages": 5,
                },
            ],
            "M=4096,N=32768,K=512": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 3,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 4,
                    "num_stages": 5,
                },
            ],
            "M=4096,N=7168,K=16384": [
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 64,
                        "GROUP_M": 32,
                        "FLATTEN": True,
                        "TMA_STORE": True,
                    },
                    "num_warps": 8,
                    "num_stages": 6,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 64,
                        "GROUP_M": 32,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 5,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 64,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 5,
                },
            ],
            "M=4096,N=4096,K=7168": [
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 64,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": True,
                    },
                    "num_warps": 8,
                    "num_stages": 6,
                },
            ],
            "M=4096,N=7168,K=2048": [
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "FLATTEN": True,
                        "TMA_STORE": True,
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": False,
                    },
                    "num_warps": 8,
                    "num_stages": 4,
                },
            ],
            "M=2048,N=2112,K=7168": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 256,
                        "BLOCK_N": 64,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 5,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 64,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": False,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 4,
                },
            ],
            "M=256,N=7168,K=2048": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 64,
                        "BLOCK_N": 256,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 5,
                },
            ],
            "M=512,N=4096,K=7168": [
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
                {
                    "kwargs": {
                        "IMPL": "persistent",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 8,
                        "FLATTEN": True,
                        "TMA_STORE": True,
                    },
                    "num_warps": 4,
                    "num_stages": 6,
                },
            ],
            "M=96,N=24576,K=1536": [
                {"kwargs": {"IMPL": "scaled_mm"}},
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 1,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 3,
                },
                {
                    "kwargs": {
                        "IMPL": "triton",
                        "BLOCK_M": 128,
                        "BLOCK_N": 128,
                        "BLOCK_K": 128,
                        "GROUP_M": 32,
                        "USE_TMA": True,
                        "SPLIT_K": 1,
                    },
                    "num_warps": 4,
                    "num_stages": 3,
                },
            ],
        }
    }
}

CONFIGS = _RECORDS


def configs(kernel, shape=None, device=None):
    """triton.Config list of ``kernel``: one shape's ("M=64,N=2112,K=7168"), or every shape's, deduplicated;
    ``device``: a GPU name as stored (default: every device)."""
    found, seen = [], set()
    for dev, shapes in CONFIGS[kernel].items():
        if device is not None and dev != device:
            continue
        for key, records in shapes.items():
            if shape is not None and key != shape:
                continue
            for r in records:
                ident = repr(sorted(r["kwargs"].items())) + repr(
                    sorted((k, v) for k, v in r.items() if k != "kwargs")
                )
                if ident not in seen:
                    seen.add(ident)
                    found.append(triton.Config(**r))
    return found
