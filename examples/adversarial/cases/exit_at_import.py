import sys

sys.exit("leaving while being imported")
