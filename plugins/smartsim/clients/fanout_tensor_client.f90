! fanout_tensor_client: the tensor client's Fortran module, ISO_C_BINDING over fanout_tensor_client.h.
!
! Arrays go to the database without a copy. A Fortran array of shape (a, b) is stored as the C-order tensor
! (b, a): the same bytes, the dimensions reversed, as a C or Python reader expects them. The dtype argument
! (FANOUT_TC_FLOAT, ...) must match the array's kind: real(c_float) is FANOUT_TC_FLOAT, integer(c_int8_t) is
! FANOUT_TC_INT8 or FANOUT_TC_UINT8, and so on.
! Functions return 0 on success; client_error(client) says why one failed.
module fanout_tensor_client
  use, intrinsic :: iso_c_binding
  implicit none
  private

  integer(c_int), parameter, public :: FANOUT_TC_FLOAT = 1, FANOUT_TC_DOUBLE = 2, FANOUT_TC_INT8 = 3, &
                                       FANOUT_TC_INT16 = 4, FANOUT_TC_INT32 = 5, FANOUT_TC_INT64 = 6, &
                                       FANOUT_TC_UINT8 = 7, FANOUT_TC_UINT16 = 8

  type, public :: tensor_client
    type(c_ptr) :: handle = c_null_ptr
  end type

  public :: connect_env, free_client, client_error, put_tensor, unpack_tensor, put_dataset, append_to_list, &
            get_list_length, monotonic_ns

  ! put_tensor and unpack_tensor have one C signature.
  abstract interface
    function tensor_call(h, key, data, dims, n_dims, dtype) result(rc) bind(c)
      import :: c_ptr, c_char, c_size_t, c_int
      type(c_ptr), value :: h, data
      character(kind=c_char), intent(in) :: key(*)
      integer(c_size_t), intent(in) :: dims(*)
      integer(c_size_t), value :: n_dims
      integer(c_int), value :: dtype
      integer(c_int) :: rc
    end function
  end interface
  procedure(tensor_call), bind(c, name="fanout_tc_put_tensor") :: c_put_tensor
  procedure(tensor_call), bind(c, name="fanout_tc_unpack_tensor") :: c_unpack_tensor

  interface
    function c_connect_env() bind(c, name="fanout_tc_connect_env") result(h)
      import :: c_ptr
      type(c_ptr) :: h
    end function
    subroutine c_free(h) bind(c, name="fanout_tc_free")
      import :: c_ptr
      type(c_ptr), value :: h
    end subroutine
    function c_error(h) bind(c, name="fanout_tc_error") result(text)
      import :: c_ptr
      type(c_ptr), value :: h
      type(c_ptr) :: text
    end function
    function c_strlen(s) bind(c, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function
    function c_put_dataset(h, name, n, names, data, dims, n_dims, dtype) bind(c, name="fanout_tc_put_dataset") result(rc)
      import :: c_ptr, c_char, c_size_t, c_int
      type(c_ptr), value :: h
      character(kind=c_char), intent(in) :: name(*)
      integer(c_size_t), value :: n, n_dims
      type(c_ptr), intent(in) :: names(*), data(*)
      integer(c_size_t), intent(in) :: dims(*)
      integer(c_int), value :: dtype
      integer(c_int) :: rc
    end function
    function c_append_to_list(h, list, dataset) bind(c, name="fanout_tc_append_to_list") result(rc)
      import :: c_ptr, c_char, c_int
      type(c_ptr), value :: h
      character(kind=c_char), intent(in) :: list(*), dataset(*)
      integer(c_int) :: rc
    end function
    function c_get_list_length(h, list, length) bind(c, name="fanout_tc_get_list_length") result(rc)
      import :: c_ptr, c_char, c_int, c_int64_t
      type(c_ptr), value :: h
      character(kind=c_char), intent(in) :: list(*)
      integer(c_int64_t), intent(out) :: length
      integer(c_int) :: rc
    end function
    function monotonic_ns() bind(c, name="fanout_tc_monotonic_ns") result(ns)
      import :: c_int64_t
      integer(c_int64_t) :: ns
    end function
  end interface

contains

  function c_string(text) result(s)
    character(len=*), intent(in) :: text
    character(kind=c_char, len=len(text) + 1) :: s
    s = text // c_null_char
  end function

  ! The C-order dimensions of a Fortran array: its shape reversed (a scalar is one element).
  function c_dims(data) result(dims)
    type(*), dimension(..), intent(in) :: data
    integer(c_size_t), allocatable :: dims(:)
    integer :: i
    if (rank(data) == 0) then
      dims = [1_c_size_t]
    else
      dims = [(int(size(data, rank(data) - i + 1), c_size_t), i = 1, rank(data))]
    end if
  end function

  ! Connects from SSDB / SR_DB_TYPE / SR_DB_PASSWORD, as SmartRedis clients do.
  function connect_env(client) result(status)
    type(tensor_client), intent(out) :: client
    integer :: status
    client%handle = c_connect_env()
    status = merge(0, -1, c_associated(client%handle))
  end function

  subroutine free_client(client)
    type(tensor_client), intent(inout) :: client
    call c_free(client%handle)
    client%handle = c_null_ptr
  end subroutine

  ! Why the client's last call failed (or, before it connected, why connecting failed).
  function client_error(client) result(text)
    type(tensor_client), intent(in) :: client
    character(len=:), allocatable :: text
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i
    p = c_error(client%handle)
    call c_f_pointer(p, chars, [c_strlen(p)])
    allocate(character(len=size(chars)) :: text)
    do i = 1, size(chars)
      text(i:i) = chars(i)
    end do
  end function

  function put_tensor(client, key, data, dtype) result(status)
    type(tensor_client), intent(inout) :: client
    character(len=*), intent(in) :: key
    type(*), dimension(..), target, contiguous, intent(in) :: data
    integer(c_int), intent(in) :: dtype
    integer :: status
    integer(c_size_t), allocatable :: dims(:)
    dims = c_dims(data)
    status = c_put_tensor(client%handle, c_string(key), c_loc(data), dims, size(dims, kind=c_size_t), dtype)
  end function

  ! Fills data (its shape and dtype are the tensor's) from the database.
  function unpack_tensor(client, key, data, dtype) result(status)
    type(tensor_client), intent(inout) :: client
    character(len=*), intent(in) :: key
    type(*), dimension(..), target, contiguous, intent(inout) :: data
    integer(c_int), intent(in) :: dtype
    integer :: status
    integer(c_size_t), allocatable :: dims(:)
    dims = c_dims(data)
    status = c_unpack_tensor(client%handle, c_string(key), c_loc(data), dims, size(dims, kind=c_size_t), dtype)
  end function

  ! A dataset whose tensors, named tensor_names, all hold data (SmartSim-Scaling's producers put one buffer
  ! several times).
  function put_dataset(client, name, tensor_names, data, dtype) result(status)
    type(tensor_client), intent(inout) :: client
    character(len=*), intent(in) :: name, tensor_names(:)
    type(*), dimension(..), target, contiguous, intent(in) :: data
    integer(c_int), intent(in) :: dtype
    integer :: status
    integer(c_size_t), allocatable :: dims(:)
    character(kind=c_char, len=len(tensor_names) + 1), allocatable, target :: names(:)
    type(c_ptr), allocatable :: name_ptrs(:), views(:)
    integer :: i
    dims = c_dims(data)
    allocate(names(size(tensor_names)), name_ptrs(size(tensor_names)), views(size(tensor_names)))
    do i = 1, size(tensor_names)
      names(i) = trim(tensor_names(i)) // c_null_char
      name_ptrs(i) = c_loc(names(i))
      views(i) = c_loc(data)
    end do
    status = c_put_dataset(client%handle, c_string(name), size(names, kind=c_size_t), name_ptrs, views, dims, &
                           size(dims, kind=c_size_t), dtype)
  end function

  function append_to_list(client, list, dataset) result(status)
    type(tensor_client), intent(inout) :: client
    character(len=*), intent(in) :: list, dataset
    integer :: status
    status = c_append_to_list(client%handle, c_string(list), c_string(dataset))
  end function

  function get_list_length(client, list, length) result(status)
    type(tensor_client), intent(inout) :: client
    character(len=*), intent(in) :: list
    integer(c_int64_t), intent(out) :: length
    integer :: status
    status = c_get_list_length(client%handle, c_string(list), length)
  end function

end module fanout_tensor_client
