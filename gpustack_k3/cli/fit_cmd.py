"""``gpustack-k3 fit MODEL_CONFIG --gpu-type b300 [--gpus N]``: the layouts of a model that fit (core/fit.py)."""
from __future__ import annotations

import click

from gpustack_k3.api.v1alpha1.constants import EXIT_OK, EXIT_REFUSED
from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import emit, fail_input, output_option
from gpustack_k3.errors import InputError


def read_model_config(path: str):
    """ModelArch of MODEL_CONFIG: a config.json, or a directory holding one (and hf_quant_config.json beside it, read
    when present; cli/model_source.py, the reader every command shares). Unusable input names MODEL_CONFIG."""
    from gpustack_k3.cli.model_source import read_config

    return read_config(path, "MODEL_CONFIG", "give the model's config.json or its directory")


def _table(d: dict) -> None:
    click.echo(f"{d['model']} ({d['architecture']}) on {d['gpus']} x {d['gpu_type']} ({d['visible_gib']} GiB, "
               f"fraction {d['memory_fraction']}), KV {d['kv_cache_dtype']}, max model len "
               f"{d['max_model_len'] if d['max_model_len'] is None else format(d['max_model_len'], ',')}")
    for u in d["unknown"]:
        click.echo(f"unknown: {u}")
    if d["layouts"]:
        hdr = f"{'layout':<22} {'weights/GPU':>12} {'KV pool/GPU':>12} {'KV tokens/rank':>15} {'full-len conc.':>15}"
        click.echo(hdr)
        for r in d["layouts"]:
            click.echo(f"{r['layout']:<22} {r['weights_gib_per_gpu']:>8.2f} GiB {r['kv_pool_gib_per_gpu']:>8.2f} GiB "
                       f"{r['kv_tokens_per_rank']:>15,} {r['full_length_concurrency']:>15,.2f}"
                       + ("" if r["fits"] else f"  does not fit: {r['why_not']}"))
    if d["pd_splits"]:
        click.echo("P/D splits (each side its best fitting layout):")
        for s in d["pd_splits"]:
            click.echo(f"  {s['split']:<6} prefill {s['prefill']:<18} decode {s['decode']:<18} decode KV "
                       f"{s['decode_kv_tokens_per_rank']:,} tokens/rank, {s['decode_full_length_concurrency']:,.2f} "
                       "full-length requests")
    for n in d["notes"]:
        click.echo(f"note: {n}")


@click.command("fit", cls=Command)
@click.argument("model_config")
@click.option("--gpu-type", default="b300", show_default=True, help="Catalog GPU type (b300, gb300, ...).")
@click.option("--gpus", type=click.IntRange(1, 1024), default=None, help="GPUs (default: one node of the GPU type).")
@click.option("--max-model-len", type=click.IntRange(1), default=None,
              help="Context per request (default: the config's max_position_embeddings).")
@click.option("--kv-dtype", "kv_cache_dtype", default="auto", show_default=True,
              help="KV cache dtype (auto: the checkpoint dtype; fp8, bfloat16, ...).")
@click.option("--memory-fraction", type=click.FloatRange(0, 1, min_open=True), default=0.9, show_default=True)
@click.option("--all", "all_rows", is_flag=True, help="Also list the layouts that do not fit, with why.")
@output_option
def fit(model_config, gpu_type, gpus, max_model_len, kv_cache_dtype, memory_fraction, all_rows, output):
    """The layouts (TP/DP/EP/DCP, P/D splits) of a model that fit, with KV capacity and full-length concurrency."""
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.fit import fit_table
    from gpustack_k3.core.plan_moe import KV_DTYPE_BYTES

    cat = load_catalog()
    hw = cat.gpu(gpu_type)
    if hw is None:
        fail_input(InputError("--gpu-type", f"unknown GPU type {gpu_type!r}", f"use one of: {', '.join(cat.hardware)}"))
    if kv_cache_dtype != "auto" and kv_cache_dtype.lower() not in KV_DTYPE_BYTES:
        fail_input(InputError("--kv-dtype", f"{kv_cache_dtype!r} has no byte size here",
                              f"use auto or one of: {', '.join(KV_DTYPE_BYTES)}"))
    try:
        a = read_model_config(model_config)
    except InputError as exc:
        fail_input(exc)
    d = fit_table(a, gpu_type=cat.gpu_key(gpu_type), visible_gib=hw.visible_gib, gpus=gpus or hw.gpus_per_node,
                  fraction=memory_fraction, kv_dtype=kv_cache_dtype, max_model_len=max_model_len, all_rows=all_rows)
    if output == "text":
        _table(d)
    else:
        emit(d, output)
    return EXIT_OK if any(r["fits"] for r in d["layouts"]) else EXIT_REFUSED   # cli/main.py exits with it
