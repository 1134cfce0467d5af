"""The distribution-free 95 % interval of a median (bench/overhead.sh)."""
import math


def interval(x):
    """Order statistics k and n + 1 - k of x, k the largest with
    P(Bin(n, 1/2) < k) <= 2.5 %; None when n is too small for one."""
    x, n = sorted(x), len(x)
    k, p = 0, 0.0
    while True:
        p += math.comb(n, k) / 2 ** n
        if p > 0.025:
            break
        k += 1
    return (x[k - 1], x[n - k]) if k >= 1 else None
