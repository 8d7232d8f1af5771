import sys

for _ in range(300):  # 300 MB of output while being imported
    sys.stdout.write("spam " * 209715 + "\n")
sys.stdout.flush()
