"""Hosts: simulators someone else owns, adapted to robosafe (DESIGN.md, "Data flow").

:mod:`robosafe.hosts.recorder` turns a running robosuite / MuJoCo env (robosuite 1.4 or 1.5:
LIBERO, robosuite's own tasks, robosafe's CBDDL worlds) into App. B traces (paper 000, App. B);
:mod:`robosafe.hosts.libero` is the LIBERO host (roles from the task, LIBERO's task order and
evaluation protocol). Nothing here is imported by ``import robosafe``: the base install works in
an environment without robosuite, and MuJoCo is imported only when a recorder is built.
"""
