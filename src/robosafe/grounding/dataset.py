"""TouchSafeBench dataset (paper 003, App. E), one import for every part: the layout
(``grounding.layout``), the validating lazy index and its cache (``grounding.index``), frame
access (``grounding.frames``) and the writer (``grounding.writer``). Errors are
:class:`robosafe.errors.DatasetError`."""

from robosafe.errors import DatasetError  # noqa: F401
from robosafe.grounding.frames import (  # noqa: F401
    clip_episode_dir,
    load_depth_m,
    load_rgb,
)
from robosafe.grounding.index import (  # noqa: F401
    DatasetIndex,
    EpisodeIndex,
    index_dataset,
    index_episode,
    read_positions,
    visibility_note,
)
from robosafe.grounding.layout import (  # noqa: F401
    DEPTH_SENSORS,
    FRAME_KINDS,
    HUMAN_ID,
    HUMAN_TYPES,
    INFO_FILE,
    MP4_PLACEHOLDER,
    RGB_SENSORS,
    ROBOT_ID,
    SIM_TASKS,
    VIEWS,
    VISIBILITY_FILE,
    find_episodes,
    frame_path,
    planar_distance,
    read_dataset_info,
)
from robosafe.grounding.writer import (  # noqa: F401
    EpisodeRecord,
    FrameSource,
    quat_to_matrix,
    write_dataset_info,
    write_episode,
    write_topdown_video,
    write_video,
)
