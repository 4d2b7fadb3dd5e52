"""geofed: geographically distributed HPC made practical."""

__version__ = "0.1.0"
