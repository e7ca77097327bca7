"""Every `commit-owner` entry point: the click commands, their options, exit codes and the server runner."""
