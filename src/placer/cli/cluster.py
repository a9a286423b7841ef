"""`placer cluster ...`: this machine as a cluster, and any cluster shown or written as a file.

    placer cluster detect [--cpus N] [-o here.json] [--json]
    placer cluster show NAME [--json]        # a preset, a file, giph-net:..., here, here:cpus=N
"""

from __future__ import annotations

from typing import Optional

import typer

from placer.cli import app
from placer.cli.common import console, safe
from placer.cli.options import JsonOpt, at_least, output_file

cluster_app = typer.Typer(no_args_is_help=True, help="This machine as a cluster (measured), and any cluster shown "
                          "or written as a cluster file.")
app.add_typer(cluster_app, name="cluster")


def _cpus(ctx: typer.Context, param: typer.CallbackParam, value):
    from placer.runtime.detect import usable_cores

    cores = usable_cores()
    return at_least(1, min(2, cores), cores, f"the cores this process may use: {cores}")(ctx, param, value)


@cluster_app.command("detect")
def detect(cpus: Optional[int] = typer.Option(None, "--cpus", callback=_cpus,
                                              help="the CPU as N single-thread devices cpu:0..cpu:N-1 (at most the "
                                                   "cores this process may use; default: one device, all cores)"),
           out: Optional[str] = typer.Option(None, "--out", "-o", callback=output_file,
                                             help="write the cluster file here (loadable by --cluster FILE)"),
           repeats: int = typer.Option(7, help="timed runs per figure and link size (3 to 101)",
                                       callback=at_least(3, 7, 101, "a median needs a few; more only takes longer")),
           as_json: bool = typer.Option(False, "--json", help="print the cluster file's JSON instead of the tables")):
    """Measure this machine as a cluster: every GPU torch sees, the CPU as one device or --cpus N
    single-thread devices, every link timed (pinned copies between host and GPU, GPU to GPU, the
    executor's hand-over between CPU devices), memory less the headroom a run needs. The date, the
    machine, the spread of every timing and the memory rule go into the file's meta. Takes a few
    seconds; the figures move with the machine's load."""
    from placer.frontends.native import cluster_to_doc, save_cluster
    from placer.io import dumps
    from placer.runtime.detect import detect_cluster

    with console.status("measuring this machine's devices and links ...", spinner="dots"):
        c = detect_cluster(cpus, repeats=repeats)
    if out is not None:
        save_cluster(c, out)
    if as_json:
        import sys

        sys.stdout.write(dumps(cluster_to_doc(c)))
        return
    _render(c)
    if out is not None:
        console.print(f"wrote {safe(out)} (use it with --cluster {safe(out)})")


@cluster_app.command("show")
def show(name: str = typer.Argument(..., help="a preset (k80x2, ...), a cluster file, giph-net:..., here or here:cpus=N"),
         as_json: bool = JsonOpt):
    """Print a cluster: devices, memory, speeds and links. With --json, the cluster file itself
    (save it and pass it to --cluster: it reads back the same)."""
    from placer.frontends.native import cluster_to_doc
    from placer.io import dumps
    from placer.resolve import resolve_cluster

    c = resolve_cluster(name)
    if as_json:
        import sys

        sys.stdout.write(dumps(cluster_to_doc(c)))
        return
    _render(c)


def _render(c) -> None:
    from rich.table import Table

    view = _view(c)
    console.print(f"cluster {safe(c.name)}: {c.n_devices} device(s)"
                  + (f"; {safe(view['description'])}" if view["description"] else ""))
    t = Table("device", "kind", "model (cost key)", "memory", "matmul", "memory bandwidth", "op launch")
    for d in view["devices"]:
        t.add_row(safe(d["name"]), d["kind"], safe(d["model"]), f"{d['memory_bytes'] / 2**30:,.2f} GiB",
                  f"{d['peak_flops_per_us'] / 1e6:,.3f} TFLOP/s", f"{d['mem_bw_bytes_per_us'] / 1e3:,.1f} GB/s",
                  f"{d['launch_us']:,.2f} us")
    console.print(t)
    if view["links"]:
        t = Table("links", "bandwidth", "latency", title="links (every ordered pair of devices)")
        for ln in view["links"]:
            t.add_row(safe(ln["pairs"]), f"{ln['bandwidth_bytes_per_us'] / 1e3:,.1f} GB/s", f"{ln['latency_us']:,.1f} us")
        console.print(t)
    det = view["detected"]
    if det:
        console.print(f"measured {safe(det['date'])} on {safe(det['machine'])}: per link and size the median "
                      f"of {det['repeats']} timings (quartiles below it); --json has how each was timed")
        t = Table("link", "timed", "fit", *(_size(s) for s in det["sizes"]))
        if not det["links"]:
            console.print("no links measured: one device")
        for ln in det["links"]:
            t.add_row(safe(ln["pairs"]), KIND_LABEL.get(ln.get("kind"), safe(ln.get("kind", "?"))),
                      f"{ln['latency_us']:,.1f} us + bytes / {ln['bandwidth_bytes_per_us'] / 1e3:,.1f} GB/s",
                      *(f"{p['median_us']:,.1f} us\n{p['q25_us']:,.1f} .. {p['q75_us']:,.1f}" for p in ln["per_size"]))
        if det["links"]:
            console.print(t)
        console.print(f"memory limits: {safe(det['memory'])}", highlight=False)


KIND_LABEL = {"handover": "thread hand-over", "h2d": "pinned copy", "d2h": "pinned copy", "g2g": "GPU copy"}


def _view(c) -> dict:
    """What the tables show: devices, the distinct links with the pairs that share each, and the
    measured links of a detected cluster (its meta)."""
    D = c.n_devices
    same: dict = {}
    for a in range(D):
        for b in range(D):
            if a != b:
                key = (float(c.bandwidth_bytes_per_us[a, b]), float(c.latency_us[a, b]))
                same.setdefault(key, []).append(f"{c.devices[a].name}->{c.devices[b].name}")
    links = [{"pairs": _pairs(p), "bandwidth_bytes_per_us": bw, "latency_us": lat} for (bw, lat), p in same.items()]
    meta = dict(c.meta)
    det = meta.get("detected") if isinstance(meta.get("detected"), dict) else None
    if det:
        m = det.get("machine", {})
        det = {"date": det.get("date", "?"), "repeats": det.get("repeats", "?"), "sizes": det.get("sizes_bytes", []),
               "machine": f"{m.get('hostname', '?')} ({m.get('cpu', '?')}, {m.get('cores', '?')} cores, torch {m.get('torch', '?')})",
               "memory": "; ".join(f"{k}: {v}" for k, v in det.get("memory", {}).items()
                                   if isinstance(v, str) and any(d.kind == k for d in c.devices)),
               "links": [{**ln, "pairs": _pairs(ln.get("applies_to", []))} for ln in det.get("links", [])]}
    return {"description": str(meta.get("description", "")), "devices": [vars(d) for d in c.devices],
            "links": links, "detected": det}


def _pairs(p: list[str], most: int = 4) -> str:
    return ", ".join(p[:most]) + (f" and {len(p) - most:,} more" if len(p) > most else "")


def _size(b: int) -> str:
    return f"{b / 2**20:g} MiB" if b >= 2**20 else f"{b / 2**10:g} KiB"
