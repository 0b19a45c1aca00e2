from echoray.cli import entry

entry()
