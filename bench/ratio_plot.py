"""The frame shared by the plots of ours / the best baseline (`bench.scorecard`, `bench.live`):
the ratio's axis label, the legend above, the command that made the plot below."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def finish(fig: Any, ax: Any, path: Path, command: str, xlabel: str, columns: int) -> None:
    """Label, grid and legend the ratio axis `ax`, sign `fig` with `command`, save it to
    `path` and close it."""
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel, fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(
        fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=columns, frameon=False
    )
    fig.text(0.01, 0.002, command, fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.01, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
