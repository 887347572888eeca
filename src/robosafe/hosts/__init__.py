"""Hosts: simulators someone else owns, adapted to robosafe (DESIGN.md, "Data flow").

:mod:`robosafe.hosts.contract` is the host contract every host keeps (``HostEnv``, one typed
``TaskInfo``, ``check_host_env``); :mod:`robosafe.hosts.registry` makes them
(``make_env(host, task, **options)``) and says what each supports. The hosts:
:mod:`robosafe.hosts.robosafe` (robosafe's CBDDL world, :mod:`robosafe.sim`),
:mod:`robosafe.hosts.libero` (roles from the task, LIBERO's task order and evaluation
protocol) and :mod:`robosafe.hosts.robosuite` (robosuite's own tasks).
:mod:`robosafe.hosts.recorder` turns a running robosuite / MuJoCo env (robosuite 1.4 or 1.5)
into App. B traces (paper 000, App. B). Nothing here is imported by ``import robosafe``: the
base install works in an environment without robosuite, and MuJoCo is imported only when a
recorder is built.
"""
