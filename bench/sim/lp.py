"""A small dense simplex for the bounds: maximise c.x subject to A x <= b, x >= 0, with b >= 0.

The bounds' programs have a few hundred variables at most, so a tableau with Bland's rule (no
cycling on the degenerate origin) is enough and keeps the benchmark free of a solver dependency.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

EPS = 1e-9


class UnboundedError(ValueError):
    pass


def _pivot(tableau: NDArray[np.float64], row: int, col: int) -> None:
    tableau[row] /= tableau[row, col]
    for other in range(tableau.shape[0]):
        if other != row and abs(tableau[other, col]) > EPS:
            tableau[other] -= tableau[other, col] * tableau[row]


def _leaving_row(tableau: NDArray[np.float64], col: int, basis: list[int]) -> int:
    column = tableau[:-1, col]
    rhs = tableau[:-1, -1]
    rows = [r for r in range(len(column)) if column[r] > EPS]
    if not rows:
        raise UnboundedError("the program is unbounded")
    ratios = [(rhs[r] / column[r], basis[r], r) for r in rows]
    return min(ratios)[2]


def maximise(
    c: NDArray[np.float64], a: NDArray[np.float64], b: NDArray[np.float64]
) -> tuple[float, NDArray[np.float64]]:
    """The optimum value and one optimal x."""
    m, n = a.shape
    tableau = np.zeros((m + 1, n + m + 1))
    tableau[:m, :n] = a
    tableau[:m, n : n + m] = np.eye(m)
    tableau[:m, -1] = b
    tableau[-1, :n] = -c
    basis = list(range(n, n + m))
    while True:
        entering = [j for j in range(n + m) if tableau[-1, j] < -EPS]
        if not entering:
            break
        col = entering[0]
        row = _leaving_row(tableau, col, basis)
        _pivot(tableau, row, col)
        basis[row] = col
    x = np.zeros(n + m)
    for r, var in enumerate(basis):
        x[var] = tableau[r, -1]
    return float(tableau[-1, -1]), x[:n]
