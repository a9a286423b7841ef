"""Timeline (Gantt chart) of one simulated training step: a compute lane and a send lane per device.

Ops are coloured by role (forward, backward, update); a device's send lane shows the transfers of
the tensors it produces (Placeto appendix A.5: one outgoing queue per device).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROLE_COLOURS = ("#4C72B0", "#DD8452", "#55A868")  # forward, backward, update
ROLE_LABELS = ("forward", "backward", "update")


def plot_timeline(sim, device_names, path, roles=None, title: str = "", lower_bound_us: float | None = None,
                  dpi: int = 64) -> Path:
    """Write a PNG of ``sim`` (a :class:`placer.sim.SimResult`) to ``path``. ``roles`` is the graph's
    per-op role array (all forward when omitted). Times are shown in milliseconds."""
    from placer.viz.backend import pyplot

    plt = pyplot()
    n_dev = len(device_names)
    roles = np.zeros(len(sim.start_us), dtype=np.int64) if roles is None else np.asarray(roles, dtype=np.int64)
    start_ms, dur_ms = np.asarray(sim.start_us) / 1e3, (np.asarray(sim.end_us) - np.asarray(sim.start_us)) / 1e3
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.55 * n_dev), dpi=dpi)
    seen: set[str] = set()

    def once(label: str) -> str | None:
        if label in seen:
            return None
        seen.add(label)
        return label

    for d in range(n_dev):
        y = 2 * (n_dev - 1 - d)
        on = np.asarray(sim.device) == d
        for r in range(3):
            sel = on & (roles == r) & (dur_ms > 0)
            if sel.any():
                ax.broken_barh(list(zip(start_ms[sel], dur_ms[sel])), (y + 0.55, 0.9), facecolors=ROLE_COLOURS[r],
                               edgecolor="none", label=once(ROLE_LABELS[r]))
        t = sim.transfers
        src = np.asarray(t["src"])
        if len(src):
            sel = src == d
            if sel.any():
                s = np.asarray(t["start_us"])[sel] / 1e3
                w = (np.asarray(t["end_us"])[sel] - np.asarray(t["start_us"])[sel]) / 1e3
                ax.broken_barh(list(zip(s, w)), (y + 0.1, 0.35), facecolors="#8C8C8C", edgecolor="none",
                               label=once("send"))
    ax.set_yticks([2 * (n_dev - 1 - d) + 1 for d in range(n_dev)])
    ax.set_yticklabels([f"{nm}\n{u:.0%} busy" for nm, u in zip(device_names, sim.utilisation)], fontsize=8)
    ax.set_xlabel("time (ms)")
    if lower_bound_us:
        ax.axvline(lower_bound_us / 1e3, color="k", lw=0.8, ls="--", label="lower bound")
    ax.set_xlim(0, max(sim.makespan_us / 1e3, 1e-9) * 1.01)
    ax.set_title(title or f"step time {sim.makespan_us / 1e3:,.2f} ms", fontsize=9)
    ax.legend(loc="center left", fontsize=7, frameon=False, bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
