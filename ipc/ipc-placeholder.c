/* replaced by the access log */
#include "fs/fs-event.h"
