"""tokenwatt: the library behind the workflow's rules.

Plain functions that take data and return data; the Snakemake scripts one level up
do the file I/O and call into these modules.
"""

__version__ = "0.1.0"
