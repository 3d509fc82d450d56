"""What generated projects are made of: repositories, package families, type weights, sizes,
and the defects planted in them with the rules that report each."""

from __future__ import annotations

MIN_ASSETS = 100

REPOSITORY = "Repository"
COMMON = "CommonRepository"
DLC = "DLC_Repository"
REPOSITORIES = (REPOSITORY, COMMON, DLC)
REPOSITORY_SHARES = {REPOSITORY: 0.60, COMMON: 0.25, DLC: 0.15}
# Which repositories a resource may depend on: the main game and DLC build on the common one.
VISIBLE_REPOSITORIES = {
    REPOSITORY: (REPOSITORY, COMMON),
    COMMON: (COMMON,),
    DLC: (DLC, REPOSITORY, COMMON),
}

TYPE_WEIGHTS = {
    "Texture": 40,
    "Material": 20,
    "Mesh": 10,
    "Model": 10,
    "Effect": 6,
    "Sound": 6,
    "Animation": 6,
    "Skeleton": 2,
}
KNOWN_TYPES = tuple(TYPE_WEIGHTS)
PLACEABLE_TYPES = ("Model", "Mesh", "Effect", "Sound")

TEXTURE_SIZES = {64: 10, 128: 20, 256: 30, 512: 22, 1024: 13, 2048: 5}
MATERIAL_TEXTURE_COUNTS = {1: 30, 2: 35, 3: 25, 4: 10}
TEXTURE_FORMATS = ("ASTC_6x6", "ASTC_6x6", "ASTC_4x4", "ETC2_RGBA")
TEXTURE_SIZE_BUDGET = 2048  # the starter library's texture-max-size
FACE_BUDGET = 20000  # the starter library's model-face-budget
SOURCE_TGA_MAX_SIZE = 512  # larger sources would make the project too big to be useful

# (package family, variant stems, types it holds, weight within its repository). Families with a
# `{k}` stem get more variants as the project grows, so a package holds ~200 resources.
ALL_TYPES = tuple(TYPE_WEIGHTS)
ART_TYPES = ("Texture", "Material", "Mesh", "Model")
CHARACTER_TYPES = ("Texture", "Material", "Mesh", "Model", "Animation", "Skeleton")
PACKAGE_FAMILIES = {
    REPOSITORY: (
        (
            "Characters",
            ("Hero_{k}", "Npc_{k}", "Monster_{k}", "英雄_{k}", "角色/英雄"),
            CHARACTER_TYPES,
            22,
        ),
        (
            "Environment",
            ("Forest_{k}", "Desert_{k}", "Town_{k}", "Dungeon_{k}", "城镇_{k}"),
            ART_TYPES,
            30,
        ),
        ("Props", ("Common_{k}", "Weapons_{k}", "道具_{k}"), ART_TYPES, 14),
        ("Effects", ("Fire_{k}", "Magic_{k}", "技能_{k}"), ("Effect", "Texture"), 12),
        ("Audio", ("Music_{k}", "Ambience_{k}", "Voice_{k}"), ("Sound",), 10),
        ("UI", ("Icons_{k}", "HUD_{k}", "图标"), ("Texture", "Material"), 10),
        ("Dev", ("Debug", "Test"), ("Texture", "Material", "Mesh", "Model"), 2),
    ),
    COMMON: (
        ("Common/Textures", ("Set_{k}",), ("Texture",), 35),
        ("Common/Materials", ("Set_{k}",), ("Material",), 17),
        ("Common/Meshes", ("Set_{k}",), ("Mesh", "Model"), 12),
        ("Common/Rigs", ("Set_{k}",), ("Skeleton", "Animation"), 6),
        ("Common", ("Shared", "公共"), ("Texture", "Material", "Mesh"), 10),
        ("Common/Effects", ("Base_{k}",), ("Effect", "Texture"), 8),
        ("Common/Audio", ("Sfx_{k}",), ("Sound",), 12),
    ),
    DLC: (
        (
            "DLC/Winter",
            ("Characters_{k}", "Environment_{k}", "Effects_{k}", "Audio"),
            ALL_TYPES,
            60,
        ),
        ("DLC/春节", ("角色_{k}", "场景_{k}"), ALL_TYPES, 40),
    ),
}
RESOURCES_PER_PACKAGE = 200

# Minimum resources of each (type, repository) made before the random ones, so that every
# planter finds candidates even in the smallest project.
GUARANTEED = (
    ("Texture", REPOSITORY, 16),
    ("Material", REPOSITORY, 8),
    ("Mesh", REPOSITORY, 10),
    ("Model", REPOSITORY, 9),
    ("Effect", REPOSITORY, 3),
    ("Sound", REPOSITORY, 4),
    ("Skeleton", REPOSITORY, 1),
    ("Animation", REPOSITORY, 1),
    ("Texture", COMMON, 4),
    ("Material", COMMON, 2),
    ("Mesh", COMMON, 2),
    ("Sound", COMMON, 1),
    ("Texture", DLC, 2),
    ("Material", DLC, 1),
    ("Model", DLC, 1),
)
GUARANTEED_DEV = (
    ("Material", "Dev/Debug", 2),
    ("Texture", "Dev/Debug", 1),
    ("Mesh", "Dev/Test", 1),
)

PLANT_COUNTS = {
    "duplicate_guid": 2,
    "missing_dep": 2,
    "item_without_folder": 2,
    "level_unknown_guid": 2,
    "oversized_texture": 2,
    "uncompressed_texture": 2,
    "texture_missing_mips": 2,
    "model_over_face_budget": 2,
    "misnamed_material": 2,
    "duplicate_name": 2,  # pairs: both GUIDs of each pair are listed
    "never_cook_ref": 2,
    "dependency_cycle": 1,  # one cycle of three models: its three GUIDs are listed
    "missing_collision_shape": 2,
    "src_tex_conflict": 2,
    "effect_non_texture_dep": 2,
    "unknown_type": 1,
    "material_source_path": 2,
}

# What reports each planted kind: starter-library rule ids, and "cook:<key>" for the cook list.
# `planted[kind]` lists the GUIDs those reports name (the defective resource, or the dangling /
# offending GUID it references).
DETECTED_BY = {
    "duplicate_guid": ("repo-guid-unique", "cook:ambiguous"),
    "missing_dep": ("deps-resolve", "deps-on-disk", "cook:missing"),
    "item_without_folder": ("resource-folder-exists", "level-resources-on-disk", "cook:missing"),
    "level_unknown_guid": ("level-resources-exist", "cook:missing"),
    "oversized_texture": ("texture-max-size",),
    "uncompressed_texture": ("texture-compressed",),
    "texture_missing_mips": ("texture-has-mips",),
    "model_over_face_budget": ("model-face-budget",),
    "misnamed_material": ("material-naming",),
    "duplicate_name": ("names-unique",),
    "never_cook_ref": ("no-dev-deps", "cook:never_cook_refs"),
    "dependency_cycle": ("no-dependency-cycles", "cook:cycles"),
    "missing_collision_shape": ("collision-shapes-exist", "cook:missing"),
    "src_tex_conflict": ("texture-source-size",),
    "effect_non_texture_dep": ("effect-deps-are-textures",),
    "unknown_type": ("known-types",),
    "material_source_path": ("material-no-source-path",),
}

WORLD_NAMES = (
    "Town",
    "Forest",
    "Dungeon",
    "Desert",
    "Castle",
    "Harbor",
    "Snowfield",
    "Swamp",
    "Canyon",
    "Temple",
    "Volcano",
    "Island",
)
STARTER_RULES = ("rules", "messiah-common.yaml")
PAYLOAD_POOL_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 128 << 10
XML_HEAD = '<?xml version="1.0" encoding="utf-8"?>\n'
