// conform/impl.h — the contract an implementation is written against: the
// interface (conform/interface.h: BlockConfig, views, Implementation) and the
// op table that calls it (conform/op_info.h).
#pragma once

#include "conform/interface.h"
#include "conform/op_info.h"
