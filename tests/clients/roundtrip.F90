! The Fortran client's round trip (language_clients_test), as roundtrip.c: every dtype (uint8/uint16 stored from
! int8/int16 arrays), three shapes, elements i % 100. Prints "ok N".
program roundtrip
  use, intrinsic :: iso_c_binding
  use fanout_tensor_client
  implicit none
  type(tensor_client) :: c
  character(len=64) :: prefix
  integer :: count = 0

  call get_command_argument(1, prefix)
  if (connect_env(c) /= 0) then
    print '(a)', 'connect: ' // client_error(c)
    error stop 1
  end if
  call rt_float(FANOUT_TC_FLOAT)
  call rt_double(FANOUT_TC_DOUBLE)
  call rt_int8(FANOUT_TC_INT8)
  call rt_int16(FANOUT_TC_INT16)
  call rt_int32(FANOUT_TC_INT32)
  call rt_int64(FANOUT_TC_INT64)
  call rt_int8(FANOUT_TC_UINT8)
  call rt_int16(FANOUT_TC_UINT16)
  print '(a,i0)', 'ok ', count
  call free_client(c)

contains

  function key(dtype, r) result(k)
    integer(c_int), intent(in) :: dtype
    integer, intent(in) :: r
    character(len=:), allocatable :: k
    character(len=128) :: buf
    write(buf, '(a,a,i0,a,i0)') trim(prefix), '_', dtype, '_', r
    k = trim(buf)
  end function

  subroutine check(status, k)
    integer, intent(in) :: status
    character(len=*), intent(in) :: k
    if (status /= 0) then
      print '(a)', k // ': ' // client_error(c)
      error stop 1
    end if
  end subroutine

#define NAME rt_float
#define TYPE real(c_float)
#define CONV(x) real(x, c_float)
#include "roundtrip_kind.inc"
#undef NAME
#undef TYPE
#undef CONV
#define NAME rt_double
#define TYPE real(c_double)
#define CONV(x) real(x, c_double)
#include "roundtrip_kind.inc"
#undef NAME
#undef TYPE
#undef CONV
#define NAME rt_int8
#define TYPE integer(c_int8_t)
#define CONV(x) int(x, c_int8_t)
#include "roundtrip_kind.inc"
#undef NAME
#undef TYPE
#undef CONV
#define NAME rt_int16
#define TYPE integer(c_int16_t)
#define CONV(x) int(x, c_int16_t)
#include "roundtrip_kind.inc"
#undef NAME
#undef TYPE
#undef CONV
#define NAME rt_int32
#define TYPE integer(c_int32_t)
#define CONV(x) int(x, c_int32_t)
#include "roundtrip_kind.inc"
#undef NAME
#undef TYPE
#undef CONV
#define NAME rt_int64
#define TYPE integer(c_int64_t)
#define CONV(x) int(x, c_int64_t)
#include "roundtrip_kind.inc"

end program roundtrip
