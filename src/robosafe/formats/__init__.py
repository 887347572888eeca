"""Other tools' data files: LeRobot v3.0 datasets in and out (DESIGN.md, ``formats``).

Nothing here imports a simulator or knows about hosts; PyAV (the ``video`` extra) is imported
only when mp4 files are written or decoded.
"""
