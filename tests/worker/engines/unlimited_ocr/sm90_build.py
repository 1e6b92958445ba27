"""The MoE kernels' launches compiled for the H200 (sm_90) on a machine without a GPU, with
Triton's own compiler and ptxas (in the triton wheel), and the shared memory each program
takes read back. Run where the kernels are compiled, not interpreted (TRITON_INTERPRET unset):

    python -m tests.worker.engines.unlimited_ocr.sm90_build 1 16 128

prints {tokens: {layout: {"gate_up": bytes, "down": bytes, and what one MLP's tiles need}},
"step": {the decode step's other kernels: bytes}} as JSON."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import triton
from transformers.models.unlimited_ocr.configuration_unlimited_ocr import UnlimitedOcrTextConfig
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from ocr_worker.engines.unlimited_ocr.kernels import choice, moe_programs, norms, routing, tuning
from ocr_worker.engines.unlimited_ocr.kernels import decode_attention as step
from ocr_worker.engines.unlimited_ocr.kernels import moe as kernels
from ocr_worker.engines.unlimited_ocr.kernels import prefill_attention as prefill
from ocr_worker.engines.unlimited_ocr.step import grouped_experts as grouped
from ocr_worker.engines.unlimited_ocr.step import step_inputs as inputs

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
ATTENTION_POINTERS = dict(
    q_ptr=BF16, k_ptr=BF16, v_ptr=BF16, rows_ptr="*i64", valid_ptr="*u8", part_ptr=F32, scale="fp32"
)
COMBINE_POINTERS = dict(
    routed_ptr=F32,
    slots_ptr=I32,
    pair_weights_ptr=F32,
    shared_ptr=BF16,
    x_ptr=BF16,
    norm_weight_ptr=BF16,
    summed_ptr=BF16,
    out_ptr=BF16,
    eps="fp32",
)
LAYOUTS = {"routed and shared": (True, True), "routed": (True, False), "shared": (False, True)}


def shared_memory(
    kernel: Any, pointers: dict[str, str], constants: dict[str, Any], tiles: tuning.Tiles
) -> int:
    """Bytes of shared memory a program of ``kernel`` takes on sm_90, as launched."""
    return int(compiled(kernel, pointers, constants, tiles).metadata.shared)


def warpgroup_mma(kernel: Any) -> bool:
    """Whether a compiled ``kernel`` multiplies on Hopper's warpgroup MMA (wgmma), not the
    older warp-wide mma.sync."""
    return "wgmma.mma_async" in kernel.asm["ptx"]


def compiled(
    kernel: Any, pointers: dict[str, str], constants: dict[str, Any], tiles: tuning.Tiles
) -> Any:
    """``kernel`` compiled for sm_90 as launched: ``pointers`` the arguments' types (pointers
    16-byte aligned, as torch's allocations are, unless the kernel asks not to specialize on
    it), any other argument a plain i32."""
    names = kernel.arg_names
    unaligned = set(kernel.do_not_specialize_on_alignment)
    constants = {n: v for n, v in constants.items() if n in names}  # flags older kernels lack
    signature = {n: "constexpr" if n in constants else pointers.get(n, "i32") for n in names}
    source = ASTSource(
        kernel,
        signature,
        constexprs={(names.index(n),): v for n, v in constants.items()},
        attrs={
            (i,): [["tt.divisibility", 16]]
            for i, n in enumerate(names)
            if pointers.get(n, "").startswith("*") and n not in unaligned
        },
    )
    options = {"num_warps": tiles.warps, "num_stages": tiles.stages}
    return triton.compile(source, target=SM90, options=options)


def launches(
    tokens: int, with_routed: bool, with_unrouted: bool, tiles: tuning.Tiles | None = None
) -> dict[str, int | bool]:
    """Shared memory of the gate/up and the down launch that ``moe._launch`` makes for
    ``tokens`` tokens with these MLPs, at v1's widths (and whether each runs on the
    warpgroup MMA), with ``tiles`` or those chosen for the count."""
    hidden, inter = V1.hidden_size, V1.moe_intermediate_size
    top_k = int(V1.num_experts_per_tok or 1)
    shared_inter = inter * (V1.n_shared_experts or 1)
    tiles = tiles or kernels.tiles_for(tokens)
    sort = with_routed and (tokens > kernels.SORT_PAIRS_ABOVE or tiles.plan)
    common: dict[str, Any] = dict(
        EXPERTS=V1.n_routed_experts if with_routed else 0,
        HIDDEN=hidden,
        INTER=inter,
        SHARED_INTER=shared_inter,
        TOP_K=top_k,
        # a step of few tokens scans the top-k table; of many (Tiles.plan), and a prefill's,
        # read pair_plan's (SORTED)
        PAIRS_POW2=1 if sort else triton.next_power_of_2(tokens * top_k),
        SORTED=sort,
        ROWS=kernels.rows_per_program(tokens),
        PRECISION="tf32",
        SWAP=tiles.swap,
        WITH_ROUTED=with_routed,
        WITH_UNROUTED=with_unrouted,
    )
    gate_up_widths, down_widths = kernels.tile_widths(hidden, inter, shared_inter, tiles)
    gate_up, down = dict(common, **gate_up_widths), dict(common, **down_widths)
    # What one MLP's tiles need: the software pipeline's buffers of bf16 x/act rows and weight
    # tiles (stages - 1 of them; all ``stages`` where the MMA's M side is 64 or more, which
    # sm_90 runs as warp-group MMAs); the gate/up reads two weight tiles (gate and up) a step.
    rows = common["ROWS"]
    widest_n = max(gate_up["BLOCK_N"], gate_up["SHARED_BLOCK_N"])
    widest_k = max(down["BLOCK_K"], down["SHARED_BLOCK_K"])
    # each kernel's MMA M side: the pairs (rows), or transposed the weights' tile (the wider
    # of the routed and the shared MLP's: the PTX is read for any wgmma at all)
    gate_up_m = widest_n if tiles.swap else rows
    down_m = down["BLOCK_N"] if tiles.swap else rows
    gate_up_kernel = compiled(moe_programs.gate_up_kernel, GATE_UP_POINTERS, gate_up, tiles)
    down_kernel = compiled(moe_programs.down_kernel, DOWN_POINTERS, down, tiles)
    return {
        "gate_up": gate_up_kernel.metadata.shared,
        "down": down_kernel.metadata.shared,
        "gate_up_wgmma": warpgroup_mma(gate_up_kernel),
        "down_wgmma": warpgroup_mma(down_kernel),
        "gate_up_mma_m": gate_up_m,
        "down_mma_m": down_m,
        "gate_up_one_mlp": _buffers(tiles, gate_up_m) * (rows + 2 * widest_n) * gate_up["BLOCK_K"],
        "down_one_mlp": _buffers(tiles, down_m) * (rows + down["BLOCK_N"]) * widest_k,
    }


def _buffers(tiles: tuning.Tiles, mma_m: int) -> int:
    """Bytes an element of the pipeline's bf16 buffers takes, all stages counted: stages - 1
    of them, all ``stages`` where the MMA's M side is 64 or more (sm_90's warp-group MMA)."""
    return 2 * (tiles.stages - (mma_m < 64))


def step_kernels() -> dict[str, int]:
    """The decode step's other kernels at v1's widths (10 heads of 128, hidden 1280, 64
    experts): attention over 2,400 rows at 1 and 128 sequences in every tile the bench may
    choose from, its merge, RoPE and the KV write, the norms, routing, the experts' sum, the
    step's inputs and the token choice; and a prefill's own MoE kernels."""
    heads, hidden = V1.num_attention_heads, V1.hidden_size
    dim, row = hidden // heads, triton.next_power_of_2(hidden)  # a row's block, as launched
    experts, top_k = V1.n_routed_experts, int(V1.num_experts_per_tok or 1)
    launch = tuning.Tiles()  # num_warps 4, num_stages 3: Triton's defaults
    built: dict[str, int] = {}
    for batch in (1, 128):  # a slice per 16 rows at one sequence, 4 slices a head at 128
        plan = step.attention_plan(batch, tuning.DEFAULT_CARD)
        chunk, slices = step.attention_slices(batch, heads, 2400, plan.programs)
        for tile in tuning.TILES:
            form = "tensor cores" if tile.mma else "cuda cores"
            name = f"BLOCK={tile.block} warps={tile.warps} stages={tile.stages} {form}"
            built[f"attention {batch} {name}"] = shared_memory(
                step._attention_slices,
                ATTENTION_POINTERS,
                dict(
                    CHUNK=chunk,
                    HEADS=heads,
                    DIM=dim,
                    SLICES=slices,
                    PRECISION="tf32",
                    BLOCK=tile.block,
                    MMA=tile.mma,
                ),
                tuning.Tiles(warps=tile.warps, stages=tile.stages),
            )
        built[f"attention merge {batch}"] = shared_memory(
            step._attention_merge,
            dict(part_ptr=F32, out_ptr=BF16),
            dict(HEADS=heads, DIM=dim, SLICES=slices, SLICES_POW2=triton.next_power_of_2(slices)),
            launch,
        )
    built["rope and KV write"] = shared_memory(
        norms._rope_store,
        dict(
            qkv_ptr=BF16,
            cos_ptr=BF16,
            sin_ptr=BF16,
            q_out_ptr=BF16,
            k_pool_ptr=BF16,
            v_pool_ptr=BF16,
            write_rows_ptr="*i64",
        ),
        dict(HEADS=heads, HEADS_BLOCK=triton.next_power_of_2(heads), DIM=dim),
        launch,
    )
    norm = dict(x_ptr=BF16, delta_ptr=BF16, weight_ptr=BF16, sum_ptr=BF16, out_ptr=BF16, eps="fp32")
    for add in (True, False):
        built[f"rms norm ADD={add}"] = shared_memory(
            norms._add_rms_norm, norm, dict(COLUMNS=hidden, BLOCK=row, ADD=add), launch
        )
    # The router's weights stay fp32 (transformers keeps gate.weight in fp32).
    for fused in (routing.FUSED, routing.FUSED_WIDE):  # a step of 129-256 tokens; a prefill
        built[f"routing in one kernel ROWS={fused.rows}"] = shared_memory(
            routing._route_rows,
            dict(h_ptr=BF16, w_ptr=F32, ids_ptr=I32, weights_ptr=F32, scale="fp32"),
            dict(
                HIDDEN=hidden,
                EXPERTS=experts,
                EXPERTS_POW2=max(16, triton.next_power_of_2(experts)),
                TOP_K=top_k,
                ROWS=fused.rows,
                BLOCK=fused.block,
                PRECISION="tf32x3",
            ),
            launch,
        )
    for group, block in ((8, 256), (4, row)):  # split: logits (as mlp_bench times), then top-k
        built[f"router logits GROUP={group} BLOCK={block}"] = shared_memory(
            routing._router_logits,
            dict(h_ptr=BF16, w_ptr=F32, logits_ptr=F32),
            dict(HIDDEN=hidden, EXPERTS=experts, GROUP=group, BLOCK=min(block, row)),
            launch,
        )
    built["top-k"] = shared_memory(
        routing._top_k,
        dict(logits_ptr=F32, ids_ptr=I32, weights_ptr=F32, scale="fp32"),
        dict(EXPERTS=experts, EXPERTS_POW2=triton.next_power_of_2(experts), TOP_K=top_k),
        launch,
    )
    for add_norm in (True, False):
        built[f"experts' sum ADD_NORM={add_norm}"] = shared_memory(
            moe_programs.combine_kernel,
            COMBINE_POINTERS,
            dict(HIDDEN=hidden, TOP_K=top_k, BLOCK=row, ADD_NORM=add_norm, GATHERED=False),
            launch,
        )
    built["step inputs"] = shared_memory(
        inputs._step_inputs,
        dict(
            positions_ptr="*i64",
            generated_ptr="*i64",
            ring_rows_ptr="*i64",
            prefix_valid_ptr="*u8",
            ring_column_ptr="*i64",
            cos_table_ptr=BF16,
            sin_table_ptr=BF16,
            write_rows_ptr="*i64",
            valid_ptr="*u8",
            cos_ptr=BF16,
            sin_ptr=BF16,
        ),
        dict(DIM=dim, DIM_POW2=triton.next_power_of_2(dim), COLUMNS=inputs.COLUMNS),
        launch,
    )
    slices = triton.cdiv(V1.vocab_size, choice.SLICE)
    built["token choice, slices"] = shared_memory(
        choice._slice_best,
        dict(logits_ptr=BF16, table_ptr=I32, best_ptr=F32, where_ptr=I32),  # the step's bf16
        dict(BANS_POW2=8, SLICE=choice.SLICE),
        launch,
    )
    built["token choice, rows"] = shared_memory(
        choice._row_choice,
        dict(best_ptr=F32, where_ptr=I32, table_ptr=I32, picks_ptr="*i64"),
        dict(SLICES_POW2=triton.next_power_of_2(slices)),
        launch,
    )
    built.update(prefill_kernels())
    return built


def prefill_kernels() -> dict[str, int]:
    """A prefill's own MoE kernels (the grouped_mm path): the pair plan's counting sort (and
    the steps' sorted table, without slots), SiLU(gate)·up, and the experts' sum reading the
    grouped rows through the slots; and its attention in every tile the bench may choose."""
    hidden, inter = V1.hidden_size, V1.moe_intermediate_size
    launch = tuning.Tiles()
    experts = V1.n_routed_experts
    plan = dict(EXPERTS=experts, EXPERTS_POW2=triton.next_power_of_2(experts))
    pointers = dict(ids_ptr=I32, plan_ptr=I32, slots_ptr=I32, counts_ptr=I32)
    built = {  # as launched: a step's pairs in one chunk; a prefill's counted first, with slots
        f"pair plan CHUNK={chunk} COUNTED={counted}": shared_memory(
            kernels._pair_plan,
            pointers,
            {
                **plan,
                "CHUNK": chunk,
                "COUNTED": counted,
                "ROWS_POW2": kernels.COUNTS_ROWS,
                "SLOTS": counted,
            },
            tuning.Tiles(warps=8),
        )
        for chunk, counted in ((kernels.STEP_PLAN_CHUNK, False), (kernels.PLAN_CHUNK, True))
    }
    built["pair counts"] = shared_memory(
        kernels._pair_counts, pointers, {**plan, "CHUNK": kernels.PLAN_CHUNK}, tuning.Tiles()
    )
    built["silu times up"] = shared_memory(
        grouped._silu_mul,
        dict(projected_ptr=BF16, act_ptr=BF16),
        dict(INTER=inter, BLOCK=triton.next_power_of_2(inter)),
        launch,
    )
    built["experts' sum, gathered"] = shared_memory(
        moe_programs.combine_kernel,
        {**COMBINE_POINTERS, "routed_ptr": BF16},
        dict(
            HIDDEN=hidden,
            TOP_K=int(V1.num_experts_per_tok or 1),
            BLOCK=triton.next_power_of_2(hidden),
            ADD_NORM=True,
            GATHERED=True,
        ),
        launch,
    )
    return built | prefill_attention()


def prefill_attention() -> dict[str, int]:
    """A pass's attention (prefill_attention.py) in each of PREFILL_TILES, and whether it
    multiplies on the warpgroup MMA (named "wgmma" where it does)."""
    heads = V1.num_attention_heads
    pointers = dict(
        q_ptr=BF16,
        k_ptr=BF16,
        v_ptr=BF16,
        rows_ptr="*i64",
        q_bounds_ptr=I32,
        k_bounds_ptr=I32,
        out_ptr=BF16,
        scale_log2="fp32",
    )
    built = {}
    for tile in tuning.PREFILL_TILES:
        constants = dict(
            HEADS=heads,
            DIM=V1.hidden_size // heads,
            BLOCK_M=tile.queries,
            BLOCK_N=tile.keys,
            PRECISION="tf32",
        )
        launch = tuning.Tiles(warps=tile.warps, stages=tile.stages)
        kernel = compiled(prefill._prefill_attention, pointers, constants, launch)
        mma = "wgmma" if warpgroup_mma(kernel) else "mma.sync"
        built[f"prefill attention {tile} {mma}"] = kernel.metadata.shared
    return built


def main() -> None:
    report: dict[str, Any] = {
        tokens: {name: launches(int(tokens), *flags) for name, flags in LAYOUTS.items()}
        for tokens in sys.argv[1:]
    }
    for tokens in [t for t in sys.argv[1:] if int(t) <= kernels.SORT_PAIRS_ABOVE]:  # steps:
        # each count's tiles the other way round, to compare
        tiles = kernels.tiles_for(int(tokens))
        turned = dataclasses.replace(tiles, swap=not tiles.swap)
        report[f"{tokens} swap={turned.swap}"] = launches(int(tokens), True, True, turned)
    report["step"] = step_kernels()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
