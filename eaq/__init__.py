"""eaq: energy-aware quantization benchmarks.

What a precision choice buys (latency, throughput, power, energy, quality, memory), measured
for real and logged to MLflow. Entry point: ``python -m eaq.run``.
"""

import logging

__version__ = "0.1.0"

# transformers imports torchao eagerly; torchao then warns about every optional CUDA
# extension its wheel cannot load and torch about deprecated pytree registrations. None
# of it is actionable by a user of eaq; which kernels really ran is recorded per run instead.
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)
