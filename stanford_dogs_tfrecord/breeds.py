"""Stanford Dogs' 120 breeds, as the source archives name them and as the labels do.

Both lists ship with the package, in label order: `folder_names.txt`, the breed
folders of images.tar in their original case ('n02085620-Chihuahua'), and
`label_names.txt`, the same names lowercased, which are TFDS's `stanford_dogs`
class names. The builder takes its labels from the second; the sample writer
(`fast_tfds.samples.stanford_dogs`) names its folders from the first, through this
module, so that the tooling's need for them is an import the layer test sees.
"""

from __future__ import annotations

import importlib.resources

LABEL_NAMES_FILE = importlib.resources.files(__package__) / "label_names.txt"
_FOLDER_NAMES_FILE = importlib.resources.files(__package__) / "folder_names.txt"


def folder_names() -> list[str]:
    """The 120 breed folders of images.tar ('n02085620-Chihuahua', ...), in label order."""
    return _FOLDER_NAMES_FILE.read_text(encoding="utf-8").split()
