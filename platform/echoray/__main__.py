import sys

from echoray.cli import main

sys.exit(main())
