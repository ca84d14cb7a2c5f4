"""A tool of your own, beside the config that names it (`examples/custom-tool.yaml`).

A module in a config's own folder is imported as it is, without PYTHONPATH; installed
packages come first, so a file here never shadows one of them (docs/config.md).
"""


def count_words(text: str) -> str:
    """Count the words of a text.

    Args:
        text: The text whose words are counted.
    """
    return str(len(text.split()))
