! fanout-tensor-client-fortran: SmartSim-Scaling's throughput and aggregation-producer clients in Fortran, on
! the module fanout_tensor_client. Arguments and output as fanout-tensor-client-c (scaling_client.c).
program scaling_client
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: output_unit, error_unit
  use fanout_tensor_client
  implicit none
  type(tensor_client) :: client
  character(len=64) :: mode, arg
  integer :: rank_id, tensors
  integer(c_int64_t) :: tensor_bytes, iterations, warmup, t0
  integer(c_size_t) :: elements
  character(len=65536) :: pending  ! sample lines not yet written (see sample)
  integer :: pending_len = 0
  integer(c_int64_t) :: flushed_ns = 0

  if (command_argument_count() /= 6) then
    write(error_unit, '(a)') 'usage: fanout-tensor-client-fortran throughput|producer RANK TENSOR_BYTES ITERATIONS ' // &
                             'WARMUP TENSORS_PER_DATASET'
    stop 2
  end if
  call get_command_argument(1, mode)
  call get_command_argument(2, arg); read(arg, *) rank_id
  call get_command_argument(3, arg); read(arg, *) tensor_bytes
  call get_command_argument(4, arg); read(arg, *) iterations
  call get_command_argument(5, arg); read(arg, *) warmup
  call get_command_argument(6, arg); read(arg, *) tensors
  tensors = max(1, tensors)
  elements = int(max(1_c_int64_t, tensor_bytes / 4), c_size_t)

  flushed_ns = monotonic_ns()
  t0 = monotonic_ns()
  if (connect_env(client) /= 0) call fail('connect')
  call sample('client()', 0_c_int64_t, t0, seconds(t0, monotonic_ns()), 's')
  select case (trim(mode))
  case ('throughput')
    call throughput()
  case ('producer')
    call producer()
  case default
    write(error_unit, '(a)') 'fanout-tensor-client-fortran: unknown mode ' // trim(mode)
    stop 2
  end select
  call free_client(client)
  call flush_samples()

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    write(error_unit, '(a)') 'fanout-tensor-client-fortran: ' // what // ': ' // client_error(client)
    error stop 1
  end subroutine

  real(c_double) function seconds(a, b)
    integer(c_int64_t), intent(in) :: a, b
    seconds = real(b - a, c_double) / 1.0d9
  end function

  ! Sample lines are gathered and written 60 KB or half a second at a time (and before every wait): gfortran
  ! writes each record of a unit on a pipe with a system call of its own, which the C and Python clients do not.
  subroutine sample(metric, i, start, value, unit)
    character(len=*), intent(in) :: metric, unit
    integer(c_int64_t), intent(in) :: i, start
    real(c_double), intent(in) :: value
    character(len=160) :: line
    write(line, '(a,1x,a,1x,i0,1x,i0,1x,es24.16e3,1x,a)') 'S', metric, i, start, value, unit
    call keep(line)
  end subroutine

  ! A duration measured in nanoseconds, written as seconds in integer form ("63901e-9"): gfortran's formatting of a
  ! real (es24.16) costs microseconds per sample, between the timed calls; an integer costs a fraction of that.
  subroutine sample_ns(metric, i, start, ns)
    character(len=*), intent(in) :: metric
    integer(c_int64_t), intent(in) :: i, start, ns
    character(len=160) :: line
    write(line, '(a,1x,a,1x,i0,1x,i0,1x,i0,a)') 'S', metric, i, start, ns, 'e-9 s'
    call keep(line)
  end subroutine

  subroutine keep(line)
    character(len=*), intent(in) :: line
    integer :: n
    integer(c_int64_t) :: now
    n = len_trim(line)
    if (pending_len + n + 1 > len(pending)) call flush_samples()
    pending(pending_len + 1:pending_len + n) = line(1:n)
    pending(pending_len + n + 1:pending_len + n + 1) = new_line('a')
    pending_len = pending_len + n + 1
    now = monotonic_ns()
    if (now - flushed_ns > 500000000_c_int64_t) call flush_samples()
  end subroutine

  subroutine flush_samples()
    if (pending_len > 0) write(output_unit, '(a)', advance='no') pending(1:pending_len)
    flush(output_unit)
    pending_len = 0
    flushed_ns = monotonic_ns()
  end subroutine

  ! The loop keeps its clock readings in arrays and writes them a chunk at a time, between chunks: formatting
  ! samples between two timed calls (gfortran's internal writes cost microseconds) lengthens the gap the server
  ! idles in, and on a virtual machine a longer idle gap makes its next wake-up slower (measured: 1 KiB puts
  ! 1.6x slower than the C client's with the formatting in the loop).
  subroutine throughput()
    integer(c_int64_t), parameter :: chunk = 1024
    real(c_float), allocatable, target :: out(:), back(:)
    integer(c_int64_t) :: clocks(3, chunk)
    character(len=64) :: key
    integer(c_int64_t) :: i, first, k
    integer(c_size_t) :: e
    allocate(out(elements), back(elements))
    do e = 1, elements
      out(e) = real(rank_id, c_float) + real(e - 1, c_float) * 0.5
    end do
    write(key, '(a,i0)') 'throughput_rank_', rank_id
    first = -warmup
    do i = -warmup, iterations - 1
      k = i - first + 1
      clocks(1, k) = monotonic_ns()
      if (put_tensor(client, trim(key), out, FANOUT_TC_FLOAT) /= 0) call fail('put_tensor')
      clocks(2, k) = monotonic_ns()
      if (unpack_tensor(client, trim(key), back, FANOUT_TC_FLOAT) /= 0) call fail('unpack_tensor')
      clocks(3, k) = monotonic_ns()
      if (i == -warmup) then
        ! Bit for bit, as the C client's memcmp.
        if (any(transfer(out, 0_c_int32_t, size(out)) /= transfer(back, 0_c_int32_t, size(back)))) &
          call fail('unpacked tensor differs from the one put')
      end if
      if (k == chunk .or. i == iterations - 1) then
        call write_loop_samples(first, k, clocks, real(elements * 4, c_double))
        first = i + 1
      end if
    end do
  end subroutine

  subroutine write_loop_samples(first, count, clocks, bytes)
    integer(c_int64_t), intent(in) :: first, count, clocks(:, :)
    real(c_double), intent(in) :: bytes
    integer(c_int64_t) :: k, i
    do k = 1, count
      i = first + k - 1
      call sample_ns('put_tensor', i, clocks(1, k), clocks(2, k) - clocks(1, k))
      call sample_ns('unpack_tensor', i, clocks(2, k), clocks(3, k) - clocks(2, k))
      call sample_ns('loop_time', i, clocks(1, k), clocks(3, k) - clocks(1, k))
      ! put + read back
      call sample('loop_bandwidth', i, clocks(1, k), 2.0d0 * bytes / seconds(clocks(1, k), clocks(3, k)), 'bytes/s')
    end do
  end subroutine

  subroutine producer()
    real(c_float), allocatable, target :: data(:)
    character(len=32), allocatable :: names(:)
    character(len=64) :: dataset, list
    character(len=16) :: go
    integer(c_int64_t) :: k, t1
    integer :: t, ios
    allocate(data(elements), names(tensors))
    data = real(rank_id, c_float)
    do t = 1, tensors
      write(names(t), '(a,i0)') 'tensor_', t - 1
    end do
    write(dataset, '(a,i0)') 'aggregation_rank_', rank_id
    do k = 0, warmup + iterations - 1
      call flush_samples()
      write(output_unit, '(a,i0)') 'W ', k
      flush(output_unit)
      read(*, '(a)', iostat=ios) go
      if (ios /= 0 .or. go(1:1) /= 'G') call fail('the rank stopped the producer')
      write(list, '(a,i0)') 'iteration_', k
      t0 = monotonic_ns()
      if (put_dataset(client, trim(dataset), names, data, FANOUT_TC_FLOAT) /= 0) call fail('put_dataset')
      t1 = monotonic_ns()
      if (append_to_list(client, trim(list), trim(dataset)) /= 0) call fail('append_to_list')
      call sample('put_dataset', k - warmup, t0, seconds(t0, t1), 's')
      call sample('append_to_list', k - warmup, t1, seconds(t1, monotonic_ns()), 's')
    end do
  end subroutine

end program scaling_client
