"""The portable episode record (SafeVLA-Bench App. B, Table 13) in columnar in-memory form.

On disk an episode is the App. B JSON record (one dict per step). In memory every per-step
signal is one numpy array with time on axis 0, so signal derivation and STL evaluation are
vectorised. A per-step family that the host did not record is ``None``: DESIGN.md requires that
missing signal families deactivate dependent specs, never count as satisfied.

Contacts vary in number per step, so they are stored CSR-style: the contacts of step ``t`` are
rows ``contact_ptr[t]:contact_ptr[t+1]`` of ``contact_a``/``contact_b`` (indices into
``contact_names``) and ``contact_force_n``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

ROLES = ("robot", "target", "bystander", "furniture", "other", "human")
"""Body roles of App. B ``body_roles``. ``robot`` covers arm and gripper links; ``other`` is for
bodies that take part in contacts but play none of the scored roles (e.g. the floor).
``human`` is robosafe's extension of App. B (docs/guide/trace.md): a person's body, whose
poses every step must carry (the human-proximity specs read them); appended last so the role
codes of the others stay as they were."""


@dataclass(frozen=True)
class TaskTags:
    """The App. B task-tag record carried by a trace for hosts outside the registry."""

    template: str | None = None
    components: tuple[str, ...] = ()
    task_tags: tuple[str, ...] = ()
    object_tags: tuple[str, ...] = ()
    benchmark_signal_tags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.template is not None:
            out["template"] = self.template
        if self.components:
            out["components"] = list(self.components)
        out["task_tags"] = list(self.task_tags)
        out["object_tags"] = list(self.object_tags)
        out["benchmark_signal_tags"] = list(self.benchmark_signal_tags)
        return out


@dataclass(eq=False)
class Episode:
    """One recorded rollout.

    Shapes (T = number of steps): ``t`` (T,) int; ``eef_pos_m`` (T, 3); ``body_pos_m``
    (T, B, 3) for ``body_names``; ``body_quat_wxyz`` (T, Q, 4) for ``quat_names``;
    ``contact_ptr`` (T+1,), ``contact_a``/``contact_b`` (K,) int32, ``contact_force_n`` (K,);
    ``joint_torque_nm`` (T, J); ``gripper_contact`` (T,) bool; ``cost`` (T,).
    """

    episode_id: str
    benchmark: str
    task_id: str
    success: bool | None
    """The host's success label; None when the source does not say (a LeRobot dataset
    without ``next.success``): SR, SBU and P[U|S] leave such an episode out, never count it
    as a failure."""
    dt: float
    target_object: str | None
    body_roles: dict[str, str]
    t: np.ndarray
    eef_pos_m: np.ndarray | None = None
    body_names: tuple[str, ...] = ()
    body_pos_m: np.ndarray | None = None
    quat_names: tuple[str, ...] = ()
    body_quat_wxyz: np.ndarray | None = None
    contact_names: tuple[str, ...] = ()
    contact_ptr: np.ndarray | None = None
    contact_a: np.ndarray | None = None
    contact_b: np.ndarray | None = None
    contact_force_n: np.ndarray | None = None
    joint_torque_nm: np.ndarray | None = None
    gripper_contact: np.ndarray | None = None
    task_tags: TaskTags | None = None
    seed: int | None = None
    instance_id: str | None = None
    policy: str | None = None
    cost: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return int(self.t.shape[0])

    @property
    def has_contacts(self) -> bool:
        return self.contact_ptr is not None

    def body_index(self, name: str) -> int | None:
        """Index of ``name`` in ``body_names`` or None."""
        try:
            return self.body_names.index(name)
        except ValueError:
            return None

    def quat_index(self, name: str) -> int | None:
        try:
            return self.quat_names.index(name)
        except ValueError:
            return None

    def contacts_at(self, step: int) -> list[tuple[str, str, float]]:
        """Contacts of one step as (a, b, force_n) tuples (for display and tests)."""
        if self.contact_ptr is None:
            return []
        lo, hi = int(self.contact_ptr[step]), int(self.contact_ptr[step + 1])
        names = self.contact_names
        return [(names[int(self.contact_a[k])], names[int(self.contact_b[k])],
                 float(self.contact_force_n[k])) for k in range(lo, hi)]

    def signal_families(self) -> frozenset[str]:
        """Names of the per-step families this episode recorded (``None`` ones excluded)."""
        present = {"t"}
        for name in ("eef_pos_m", "body_pos_m", "body_quat_wxyz", "joint_torque_nm",
                     "gripper_contact", "cost"):
            if getattr(self, name) is not None:
                present.add(name)
        if self.contact_ptr is not None:
            present.add("contacts")
        return frozenset(present)
