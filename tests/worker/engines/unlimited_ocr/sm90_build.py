"""The MoE kernels' launches compiled for the H200 (sm_90) on a machine without a GPU, with
Triton's own compiler and ptxas (in the triton wheel), and the shared memory each program
takes read back. Run where the kernels are compiled, not interpreted (TRITON_INTERPRET unset):

    python -m tests.worker.engines.unlimited_ocr.sm90_build 1 16 128

prints {tokens: {layout: {"gate_up": bytes, "down": bytes, and what one MLP's tiles need}}}
as JSON."""

from __future__ import annotations

import json
import sys
from typing import Any

import triton
from transformers.models.unlimited_ocr.configuration_unlimited_ocr import UnlimitedOcrTextConfig
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from ocr_worker.engines.unlimited_ocr import moe_kernels as kernels

SM90 = GPUTarget("cuda", 90, 32)
H200_SHARED_PER_BLOCK = 232_448  # bytes (cudaDevAttrMaxSharedMemoryPerBlockOptin, sm_90)
V1 = UnlimitedOcrTextConfig()  # the official v1 widths: the config class's defaults
BF16, I32, F32 = "*bf16", "*i32", "*fp32"
GATE_UP_POINTERS = dict(
    h_ptr=BF16, ids_ptr=I32, w_ptr=BF16, act_ptr=BF16, shared_w_ptr=BF16, shared_act_ptr=BF16
)
DOWN_POINTERS = dict(
    act_ptr=BF16,
    ids_ptr=I32,
    topk_weights_ptr=F32,
    w_ptr=BF16,
    out_ptr=F32,
    shared_act_ptr=BF16,
    shared_w_ptr=BF16,
    shared_out_ptr=BF16,
)
LAYOUTS = {"routed and shared": (True, True), "routed": (True, False), "shared": (False, True)}


def shared_memory(kernel: Any, pointers: dict[str, str], constants: dict[str, Any], tiles) -> int:  # type: ignore[no-untyped-def]
    """Bytes of shared memory a program of ``kernel`` takes on sm_90, as launched: pointers
    16-byte aligned (as torch's allocations are), everything else a plain i32."""
    names = kernel.arg_names
    constants = {n: v for n, v in constants.items() if n in names}  # flags older kernels lack
    signature = {n: "constexpr" if n in constants else pointers.get(n, "i32") for n in names}
    source = ASTSource(
        kernel,
        signature,
        constexprs={(names.index(n),): v for n, v in constants.items()},
        attrs={(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n in pointers},
    )
    options = {"num_warps": tiles.warps, "num_stages": tiles.stages}
    return int(triton.compile(source, target=SM90, options=options).metadata.shared)


def launches(tokens: int, with_routed: bool, with_unrouted: bool) -> dict[str, int]:
    """Shared memory of the gate/up and the down launch that ``moe_kernels._launch`` makes for
    ``tokens`` tokens with these MLPs, at v1's widths."""
    hidden, inter = V1.hidden_size, V1.moe_intermediate_size
    top_k = int(V1.num_experts_per_tok or 1)
    shared_inter = inter * (V1.n_shared_experts or 1)
    tiles = kernels.tiles_for(tokens)
    common = dict(
        EXPERTS=V1.n_routed_experts if with_routed else 0,
        HIDDEN=hidden,
        INTER=inter,
        SHARED_INTER=shared_inter,
        TOP_K=top_k,
        PAIRS_POW2=triton.next_power_of_2(tokens * top_k),
        ROWS=kernels.rows_per_program(tokens),
        PRECISION="tf32",
        WITH_ROUTED=with_routed,
        WITH_UNROUTED=with_unrouted,
    )
    gate_up = dict(
        common,
        BLOCK_N=kernels._tile(inter, tiles.gate_up_n),
        SHARED_BLOCK_N=kernels._tile(shared_inter, tiles.gate_up_n),
        BLOCK_K=kernels._tile(hidden, tiles.k),
    )
    down = dict(
        common,
        BLOCK_N=kernels._tile(hidden, tiles.down_n),
        BLOCK_K=kernels._tile(inter, tiles.k),
        SHARED_BLOCK_K=kernels._tile(shared_inter, tiles.k),
    )
    # What one MLP's tiles need: the software pipeline's buffers (stages - 1 of them) of bf16
    # x/act rows and weight tiles; the gate/up reads two weight tiles (gate and up) a step.
    buffers, rows = 2 * (tiles.stages - 1), common["ROWS"]
    widest_n = max(gate_up["BLOCK_N"], gate_up["SHARED_BLOCK_N"])
    widest_k = max(down["BLOCK_K"], down["SHARED_BLOCK_K"])
    return {
        "gate_up": shared_memory(kernels._gate_up, GATE_UP_POINTERS, gate_up, tiles),
        "down": shared_memory(kernels._down, DOWN_POINTERS, down, tiles),
        "gate_up_one_mlp": buffers * (rows + 2 * widest_n) * gate_up["BLOCK_K"],
        "down_one_mlp": buffers * (rows + down["BLOCK_N"]) * widest_k,
    }


def main() -> None:
    report = {
        tokens: {name: launches(int(tokens), *flags) for name, flags in LAYOUTS.items()}
        for tokens in sys.argv[1:]
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
