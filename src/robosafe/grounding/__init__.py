"""TouchSafeBench collision grounding (paper 003): dataset layout, lazy index, synthetic data."""

from robosafe.grounding.dataset import (
    DEPTH_SENSORS,
    HUMAN_TYPES,
    RGB_SENSORS,
    SIM_TASKS,
    VIEWS,
    DatasetError,
    DatasetIndex,
    EpisodeIndex,
    EpisodeRecord,
    find_episodes,
    frame_path,
    index_dataset,
    index_episode,
    load_depth_m,
    load_rgb,
    planar_distance,
    read_dataset_info,
    write_dataset_info,
    write_episode,
)
from robosafe.grounding.synthetic import (
    SyntheticConfig,
    SyntheticSummary,
    generate_dataset,
    iter_synthetic_episodes,
    synthesize_episode,
)

__all__ = [
    "DEPTH_SENSORS", "HUMAN_TYPES", "RGB_SENSORS", "SIM_TASKS", "VIEWS", "DatasetError",
    "DatasetIndex", "EpisodeIndex", "EpisodeRecord", "SyntheticConfig", "SyntheticSummary",
    "find_episodes", "frame_path", "generate_dataset", "index_dataset", "index_episode",
    "iter_synthetic_episodes", "load_depth_m", "load_rgb", "planar_distance",
    "read_dataset_info", "synthesize_episode", "write_dataset_info", "write_episode",
]
