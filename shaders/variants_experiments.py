"""Shader variants of the experiments (nbs/40, nbs/41): throw-away kernels that are not operators.

`VARIANTS_EXPERIMENTS` rows are `(name, file, defines)`; `shaders/variants.py` picks up every
`variants_<family>.py` beside it, and `shaders/build.py` compiles each row into `vkml/spirv/<name>.spv`.
- `experiment_prod`: a lane-strided float32 product (L lanes, then the lane products), the prod experiment.
- `experiment_step`: 64 threads of v = v/2 + 1, the small dependent dispatch the submission cost is timed with.
"""

VARIANTS_EXPERIMENTS = [
    ("experiment_prod", "experiment_prod.comp", {}),
    ("experiment_step", "experiment_step.comp", {}),
]
