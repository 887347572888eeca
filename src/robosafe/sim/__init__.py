"""The simulator: CBDDL tasks as MuJoCo worlds on robosuite, with costs, moving objects, visual
perturbations, and a recorder that turns any robosuite env into safety traces (issue #5,
VLA-Arena paper 001 Sec. 2-4 and App. 7-8; SafeVLA-Bench paper 000 App. B for the trace)."""
