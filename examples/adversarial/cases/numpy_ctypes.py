# ctypes without importing it: numpy.ctypeslib carries the module. Reading interpreter memory needs
# nothing more (here only the reference count of an object, harmlessly).
import numpy

_ctypes = numpy.ctypeslib.ctypes
print("cheat: ctypes reached", _ctypes.c_ssize_t.from_address(id(torch)).value > 0)
