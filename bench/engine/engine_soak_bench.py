"""The GPU engine's memory over many documents, side by side with transformers' `generate`.

A GPU worker lives for days; this runs round after round of ragged documents (pages and output
lengths drawn at random, so the batch's shape keeps changing) through our engine, and the same
number of batches through `generate`, sampling after each round: GPU memory allocated and
reserved by torch, the KV pool's blocks in use, and the process's resident memory.

    python3 -m bench.engine.engine_soak_bench --rounds 20                      # on the GPU
    python -m bench.engine.engine_soak_bench --tiny --rounds 4 --documents 3   # CPU smoke test
"""

from __future__ import annotations

import argparse
import gc
import random
from concurrent.futures import ThreadPoolExecutor

import psutil
import torch

from bench import harness
from bench.engine import setup
from bench.engine.setup import Engine, stand_in
from bench.harness import sync

GB = 1e9


def sample(device: torch.device, workspace_used: int | None) -> dict[str, float]:
    gc.collect()
    cuda = device.type == "cuda"
    return {
        "allocated_gb": torch.cuda.memory_allocated() / GB if cuda else 0.0,
        "reserved_gb": torch.cuda.memory_reserved() / GB if cuda else 0.0,
        "rss_gb": psutil.Process().memory_info().rss / GB,
        "pool_blocks_used": float(workspace_used) if workspace_used is not None else float("nan"),
    }


def soak_ours(engine: Engine, args: argparse.Namespace, device: torch.device) -> list[dict]:
    rng = random.Random(0)
    samples = []
    for round_no in range(args.rounds):
        docs = [
            (
                round_no * args.documents + i,  # a document of its own in every round
                rng.randint(2, args.max_pages),
                rng.randint(16, args.max_tokens),
            )
            for i in range(args.documents)
        ]
        with ThreadPoolExecutor(len(docs)) as pool:
            list(pool.map(lambda d: engine.document(*d), docs))
        sync(device)
        samples.append(sample(device, engine.workspace.num_used))
        print("ours", round_no, samples[-1], flush=True)
    return samples


def soak_generate(model, args: argparse.Namespace, device, dtype) -> list[dict]:  # type: ignore[no-untyped-def]
    rng = random.Random(0)
    hidden = model.config.text_config.hidden_size
    samples = []
    for round_no in range(args.rounds):
        pages = rng.randint(2, min(args.max_pages, args.hf_max_pages))
        prefix = setup.PAGE_TOKENS * pages + setup.PROMPT_TOKENS + 1
        embeds = torch.stack(
            [
                stand_in(prefix, hidden, device, dtype, round_no * 100 + i)
                for i in range(args.documents)
            ]
        )
        steps = rng.randint(16, args.max_tokens)
        model.generate(
            inputs_embeds=embeds,
            attention_mask=torch.ones(embeds.shape[:2], dtype=torch.long, device=device),
            max_new_tokens=steps,
            min_new_tokens=steps,
            do_sample=False,
        )
        del embeds
        sync(device)
        samples.append(sample(device, None))
        print("hf", round_no, samples[-1], flush=True)
    return samples


def report(args: argparse.Namespace, ours: list[dict], hf: list[dict], device_name: str) -> None:
    warm, last = args.warmup - 1, args.rounds - 1
    later = last - warm
    print(
        f"\n{device_name}: {args.rounds} rounds of {args.documents} ragged documents "
        f"(2-{args.max_pages} pages, 16-{args.max_tokens} tokens a group); warm-up {args.warmup}"
    )
    print(f"{'metric':<34}{'ours warm':>11}{'ours last':>11}{'hf warm':>11}{'hf last':>11}")
    for key, label in (
        ("allocated_gb", "GPU allocated (GB)"),
        ("reserved_gb", "GPU reserved (GB)"),
        ("rss_gb", "host RSS (GB)"),
        ("pool_blocks_used", "KV pool blocks in use"),
    ):
        print(
            f"{label:<34}{ours[warm][key]:>11.3f}{ours[last][key]:>11.3f}"
            f"{hf[warm][key]:>11.3f}{hf[last][key]:>11.3f}"
        )
    for key, label in (("reserved_gb", "GPU reserved"), ("rss_gb", "host RSS")):
        per_round = {
            name: (s[last][key] - s[warm][key]) * 1000 / later
            for name, s in (("ours", ours), ("hf", hf))
        }
        ours_mb, hf_mb = per_round["ours"], per_round["hf"]
        print(f"{label} growth per round after warm-up (MB): ours {ours_mb:.1f}, hf {hf_mb:.1f}")
    peak_ours = max(s["reserved_gb"] for s in ours)
    peak_hf = max(s["reserved_gb"] for s in hf)
    if peak_hf:
        print(f"peak GPU reserved, ours / hf: {peak_ours / peak_hf:.3f}")


def main() -> None:
    parser = harness.parser(
        __doc__,
        tiny=False,
        rounds=20,
        warmup=3,
        documents=16,
        help={"documents": "documents a round"},
    )
    parser.add_argument("--max-pages", type=int, default=40)
    parser.add_argument("--hf-max-pages", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=192)
    args = parser.parse_args()
    if args.rounds <= args.warmup:
        parser.error("--rounds must be more than --warmup")
    model, device, dtype = setup.bench_model(args.tiny)
    engine_args = argparse.Namespace(
        workspace_gb=4.0 if not args.tiny else 0.01,
        block_size=32,
        no_cuda_graphs=False,
        concurrency=args.documents,
        group_size=8,
    )
    engine = Engine(model, engine_args, device, dtype, 0)  # R-SWA, the default rule
    ours = soak_ours(engine, args, device)
    hf = soak_generate(model, args, device, dtype)
    name = harness.card(device)
    report(args, ours, hf, name)
    results = {"args": vars(args) | {"out": str(args.out)}, "ours": ours, "hf": hf}
    harness.write(results, args, name)


if __name__ == "__main__":
    main()
