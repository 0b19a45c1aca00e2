"""The one C extension; everything else about the package is in pyproject.toml.

echoray.data._jpeg_region: libjpeg-turbo's partial decode of a crop's rows and columns
(data/jpeg_region.py). It needs libjpeg's headers (Debian: libjpeg62-turbo-dev, which
.ci/install-debian-packages installs). It is optional so that an install without the
headers still works: the crop then decodes the whole image, about 1.2x slower, and the
unit suite fails (tests/unit/test_jpeg_region.py), so CI cannot miss it.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("echoray.data._jpeg_region", ["platform/echoray/data/_jpeg_region.c"],
                             libraries=["jpeg"], optional=True)])
