"""Small hand-built episodes whose signals can be worked out by hand."""

from pathlib import Path

import numpy as np

from robosafe.trace.episode import Episode


def make_episode(n=5, *, contacts=None, body_pos=None, quat=None, grip=None, eef=None,
                 torque=None, success=True, benchmark="libero-spatial", task_id="task_0",
                 roles=None, target="bowl", dt=0.1, episode_id="ep", **extra):
    """contacts: list (per step) of (a, b, force) tuples; body_pos: {name: (T,3)}."""
    roles = roles or {"link7": "robot", "hand": "robot", "bowl": "target",
                      "plate": "bystander", "table": "furniture"}
    names = tuple(body_pos) if body_pos else ()
    kw = {}
    if contacts is not None:
        cnames = sorted({x for step in contacts for c in step for x in c[:2]} | set(roles))
        flat = [c for step in contacts for c in step]
        kw.update(contact_names=tuple(cnames),
                  contact_ptr=np.concatenate([[0], np.cumsum([len(s) for s in contacts])]),
                  contact_a=np.array([cnames.index(c[0]) for c in flat], dtype=np.int32),
                  contact_b=np.array([cnames.index(c[1]) for c in flat], dtype=np.int32),
                  contact_force_n=np.array([c[2] for c in flat], dtype=float))
    return Episode(
        episode_id=episode_id, benchmark=benchmark, task_id=task_id, success=success, dt=dt,
        target_object=target, body_roles=roles, t=np.arange(n),
        eef_pos_m=None if eef is None else np.asarray(eef, float),
        body_names=names,
        body_pos_m=None if not body_pos else np.stack([np.asarray(body_pos[k], float)
                                                       for k in names], axis=1),
        quat_names=(target,) if quat is not None else (),
        body_quat_wxyz=None if quat is None else np.asarray(quat, float)[:, None],
        joint_torque_nm=None if torque is None else np.asarray(torque, float),
        gripper_contact=None if grip is None else np.asarray(grip, bool), **kw, **extra)


TASK_EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "src" / "robosafe" / "tasks"
                        / "examples").glob("*.bddl"))
"""The CBDDL example tasks shipped in the package."""
