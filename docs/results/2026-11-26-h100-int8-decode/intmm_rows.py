"""cuBLAS's integer GEMM at a decode step's rows, against bf16's GEMM at the real rows.

  python3 docs/results/2026-11-26-h100-int8-decode/intmm_rows.py > intmm_rows.txt

For each (K, N) of the generation grid's layers: torch._int_mm's time with the activation padded
to 17, 24 and 32 rows (it refuses 16 or fewer), and bf16 mm's time at 1 and 16 rows, CUDA events
over 200 calls after 20 warm-up calls; also whether _int_mm is exact on a transposed weight
without a copy (eaq copied it until this call, as torchao does, because torchao's comment says it is not).
"""

from __future__ import annotations

import torch

SHAPES = [(1024, 4096), (4096, 1024), (2048, 2048), (2048, 2560), (2048, 5632), (5632, 2048), (4096, 4096), (4096, 11008), (11008, 4096)]


def timed(fn, reps: int = 200) -> float:
    for _ in range(20):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1e3  # us


def main() -> None:
    cuda = torch.device("cuda")
    print(torch.cuda.get_device_name(), torch.__version__)
    print("K N | int8 weight MB | us: int_mm M=17 24 32 | int_mm M=17 on w.t() no copy, exact | bf16 mm M=1 16 | weight GB/s int_mm M=17, bf16 M=1")
    for k, n in SHAPES:
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8, device=cuda)  # torchao stores (out, in)
        wt = w.contiguous().t()
        wc = wt.contiguous()
        times = []
        for m in (17, 24, 32):
            a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device=cuda)
            times.append(timed(lambda: torch._int_mm(a, wc)))
        a = torch.randint(-128, 128, (17, k), dtype=torch.int8, device=cuda)
        try:
            exact = torch.equal(torch._int_mm(a, wt).double(), a.double() @ wt.double())
            nocopy = timed(lambda: torch._int_mm(a, wt))
        except RuntimeError as error:
            exact, nocopy = f"refused: {error}".splitlines()[0][:60], float("nan")
        wb = torch.randn(n, k, dtype=torch.bfloat16, device=cuda).t()
        bf = [timed(lambda xb=xb: xb @ wb) for xb in
              (torch.randn(1, k, dtype=torch.bfloat16, device=cuda), torch.randn(16, k, dtype=torch.bfloat16, device=cuda))]
        mb = n * k / 1e6
        print(f"{k} {n} | {mb:.1f} | {times[0]:.1f} {times[1]:.1f} {times[2]:.1f} | {nocopy:.1f} {exact} | {bf[0]:.1f} {bf[1]:.1f} | "
              f"{mb / times[0] * 1e3:.0f} {2 * mb / bf[0] * 1e3:.0f}")


if __name__ == "__main__":
    main()
